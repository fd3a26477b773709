// Text the store can hold: the one check (storable) every field of a point passes, and the
// lookup form of text a user types (lookupable).

package history

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text that both stores keep alike: PostgreSQL's text holds neither a NUL byte nor invalid
// UTF-8, SQLite's holds both. opx writes neither, in one place for every run it adds
// (storableRun), and looks up neither (lookupable): the same answer from either store.

// storable is s as a store keeps it: a NUL byte as the four characters \x00, a byte of
// invalid UTF-8 as U+FFFD.
func storable(s string) string {
	if lookupable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
}

// lookupable is whether s is text a store can hold as it is (what a user asks for that is
// not cannot be there: no such series, no such change — on either store).
func lookupable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// storableRun escapes every text of a read run a store keeps (storable), and says which
// fields it escaped, with an example: "node "a\x00b"".
func (rec *recorded) storableRun() (escaped []string) {
	fix := func(field string, p *string) {
		if v := storable(*p); v != *p {
			if len(escaped) < 5 {
				escaped = append(escaped, fmt.Sprintf("%s %q", field, *p))
			}
			*p = v
		}
	}
	fix("run id", &rec.runID)
	if c := rec.confirms; c != nil {
		fix("confirmed run id", &c.RunID)
		fix("confirmed run's origin", &c.Origin)
	}
	fix("origin", &rec.origin)
	fix("source SHA", &rec.sourceSHA)
	fix("opx version", &rec.opxVersion)
	for i := range rec.points {
		p := &rec.points[i]
		for _, f := range []struct {
			name string
			v    *string
		}{{"case key", &p.key}, {"testlist", &p.testlist}, {"op", &p.op}, {"args", &p.args}, {"backend", &p.backend},
			{"cluster", &p.cluster}, {"metric", &p.metric}, {"node", &p.ctx.Node}, {"GPU", &p.ctx.GPU}, {"driver", &p.ctx.Driver},
			{"image digest", &p.ctx.ImageDigest}, {"SM clock", &p.ctx.SMClock}, {"throttle", &p.ctx.Throttle}, {"contention", &p.ctx.Contended}, {"machine kind", &p.ctx.Kind}} {
			fix(f.name, f.v)
		}
	}
	return escaped
}
