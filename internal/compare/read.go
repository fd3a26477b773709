package compare

// Reading a side: each run streamed (results.Stream) into one compact entry per case
// the filter keeps, joined on the key's number; statuses and metric names as words.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Filter keeps the rows whose fields (results.Row.Field) have the given values.
type Filter map[string]string

func (f Filter) keeps(r *results.Row) bool {
	for k, v := range f {
		if r.Field(k) != v {
			return false
		}
	}
	return true
}

// Run is one side of a comparison as compare keeps it: for each case the filter keeps,
// joined on the key, what classing and showing it needs — its group (testlist, op,
// backend, cluster, world size, shared by a shard's rows), args label, status, message,
// headline metric and directional metrics with their spreads, worked out once from the
// row — and not the row itself, whose maps, args tree and key texts are three times that.
type Run struct {
	Side
	key       []string
	keep      Filter
	keys      *keyIDs // the join keys' numbers, shared with the other side when read with it
	at        []int32 // by key number: its index in rows, plus 1 (0: not in this side)
	ids       []int32 // by index in rows: its key number
	rows      []entry
	groups    map[group]*group
	throttled int
	contended int              // its kept rows measured under contention
	profiled  int              // rows of a profiled execution (counters mode): left out
	node      fingerprint.Node // the run's nodes merged, when it recorded any
	hasNode   bool
	// present is every value each filtered field has among the run's rows (at most
	// mostValues each), for the message when the filter keeps nothing measured;
	// dupKey and spread are the first duplicate join key and ignored spread.
	present       map[string]map[string]bool
	dupKey        string
	spreadExample string
}

// mostValues is how many values of a filtered field a run remembers.
const mostValues = 20

// entry is one case of one run. Its status, headline metric and metrics' names are
// words (the vocabulary's numbers), and its metrics hold no pointer: 128,000 entries a
// side are what compare holds, and what the collector walks.
type entry struct {
	*group
	label, message string
	status         word
	primary        word // the headline metric (none: 0, the empty word)
	impossible     bool
	contended      bool // measured under contention (results.Row.Contended)
	metrics        []value
	solPct         float64 // % of the roofline, when judged
}

type group struct {
	testlist, op, backend, cluster string
	ws                             int
}

// value is one directional metric with its spread (how is the empty word when it has
// none).
type value struct {
	name, how word
	v, lo, hi float64
}

// A word is one of the few distinct strings that many rows repeat — statuses, metric
// names, kinds of spread — as its number in the vocabulary of every comparison in the
// process; 0 is the empty string.
type word uint32

// vocab numbers words as rows bring them (one Read at a time adds; Join and its output
// read from every core): a reader takes the list as published, which only grows. It
// starts with the empty word (0) and "ok" (okWord).
var vocab = func() *vocabulary {
	v := &vocabulary{ids: map[string]word{"": 0, "ok": okWord}}
	v.list.Store(&[]string{"", "ok"})
	return v
}()

type vocabulary struct {
	mu   sync.Mutex
	ids  map[string]word
	list atomic.Pointer[[]string]
}

// okWord is the status of a measured row.
const okWord word = 1

// wordOf is s's word, numbered when it is new.
func wordOf(s string) word {
	vocab.mu.Lock()
	defer vocab.mu.Unlock()
	w, ok := vocab.ids[s]
	if !ok {
		list := append(*vocab.list.Load(), s)
		w = word(len(list) - 1)
		vocab.ids[s] = w
		vocab.list.Store(&list)
	}
	return w
}

// String is the word's text.
func (w word) String() string { return (*vocab.list.Load())[w] }

// newRun is an empty side joined on key (nil: every field of the case key) and keeping
// the rows keep keeps.
func newRun(key []string, keep Filter) *Run {
	if key == nil {
		key = results.KeyFields
	}
	return &Run{key: key, keep: keep, keys: &keyIDs{index: map[string]int32{}}, groups: map[group]*group{}}
}

// Read streams the run in dir (its manifest given, or the one found in dir) into a Run,
// a shard at a time: what it holds is the compact rows, not the run's.
func Read(ctx context.Context, dir, manifest string, key []string, keep Filter) (*Run, error) {
	out := newRun(key, keep)
	return out, read(ctx, dir, manifest, out)
}

// ReadNew reads the other side of a comparison with base (the same join; the new run's
// filter keep), its keys numbered with base's.
func ReadNew(ctx context.Context, base *Run, dir, manifest string, keep Filter) (*Run, error) {
	out := newRun(base.key, keep)
	out.groups, out.keys = base.groups, base.keys
	return out, read(ctx, dir, manifest, out)
}

// ReadSame reads one run, once, as both sides of a comparison: the run compared with
// itself, across backends or hardware (the two filters), or against itself (an A/A
// check). The sides are what Read makes of each.
func ReadSame(ctx context.Context, dir, manifest string, key []string, base, nw Filter) (*Run, *Run, error) {
	b, n := newRun(key, base), newRun(key, nw)
	n.groups, n.keys = b.groups, b.keys // one run's groups and keys
	return b, n, read(ctx, dir, manifest, b, n)
}

// read streams the run in dir into each of outs.
func read(ctx context.Context, dir, manifest string, outs ...*Run) error {
	manifest, err := results.Resolve(dir, manifest, "--manifest")
	if err != nil {
		return err
	}
	var run *results.Run
	var made []judged
	err = results.Stream(ctx, manifest, dir, func(r *results.Run) { run = r }, func(_ *results.Shard, rows []results.Row) error {
		for _, out := range outs {
			if out.rows == nil { // sized once for the run's shapes: no growing copies of every entry
				n := 0
				for _, s := range run.Summary.Shards {
					n += s.RequestedShapes
				}
				out.rows, out.ids = make([]entry, 0, n), make([]int32, 0, n)
				if len(out.keys.index) == 0 {
					out.keys.index, out.keys.list = make(map[string]int32, n), make([]string, 0, n)
				}
			}
		}
		placeAgainstLimits(rows)
		made = slices.Grow(made[:0], len(rows))[:len(rows)]
		clear(made)
		for _, out := range outs {
			out.add(rows, made)
		}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	for _, out := range outs {
		out.finish(run)
	}
	return nil
}

// judged is what a row gives each side that keeps it, worked out once (ok) for them all:
// its entry, and the recorded spreads it sets aside (how many, and the first).
type judged struct {
	x       entry
	ignored int
	example string
	ok      bool
	id      int32   // its join key's number in keys
	keys    *keyIDs // the numbers id is one of (nil until numbered)
}

// keyIDs number the join keys of a comparison in the order first met: its two sides,
// read together, find their rows and are joined by number, each key hashed once.
type keyIDs struct {
	index map[string]int32
	list  []string
}

// id is the key's number.
func (d *keyIDs) id(k string) int32 {
	if i, ok := d.index[k]; ok {
		return i
	}
	d.index[k] = int32(len(d.list))
	d.list = append(d.list, k)
	return int32(len(d.list) - 1)
}

// add keeps the rows' cases; a key seen twice keeps the last row (a retried op). A row of
// a profiled execution (counters mode) is left out: its timing is the profiler's. made
// holds each row's entry once it is made, for the other sides.
func (s *Run) add(rows []results.Row, made []judged) {
	for i := range rows {
		r := &rows[i]
		s.Rows++
		if r.Throttled != "" {
			s.throttled++
		}
		for f := range s.keep {
			if s.present == nil {
				s.present = map[string]map[string]bool{}
			}
			if s.present[f] == nil {
				s.present[f] = map[string]bool{}
			}
			if len(s.present[f]) < mostValues {
				s.present[f][r.Field(f)] = true
			}
		}
		if r.Mode == "counters" {
			s.profiled++
			continue
		}
		if !s.keep.keeps(r) {
			continue
		}
		j := &made[i]
		if !j.ok {
			s.judge(r, j)
		}
		x := j.x
		s.IgnoredSpreads += j.ignored
		if s.spreadExample == "" {
			s.spreadExample = j.example
		}
		if j.keys != s.keys { // numbered once for the sides read together
			j.id, j.keys = s.keys.id(r.KeyOf(s.key)), s.keys
		}
		id := j.id
		if int(id) >= len(s.at) { // room for every key numbered so far (what is past len is zero)
			s.at = slices.Grow(s.at, len(s.keys.list)-len(s.at))[:len(s.keys.list)]
		}
		if at := s.at[id]; at > 0 {
			s.Duplicate++
			if s.dupKey == "" {
				s.dupKey = s.keys.list[id]
			}
			s.rows[at-1] = x
			continue
		}
		if x.contended {
			s.contended++
		}
		s.rows, s.ids = append(s.rows, x), append(s.ids, id)
		s.at[id] = int32(len(s.rows))
	}
}

// judge works out the row as compare keeps it, into j.
func (s *Run) judge(r *results.Row, j *judged) {
	g := group{intern(r.Testlist), intern(r.OpType), intern(r.Backend), intern(r.Cluster), r.WorldSize}
	gp := s.groups[g]
	if gp == nil {
		gp = &g
		s.groups[g] = gp
	}
	x := entry{group: gp, label: strings.Clone(r.ArgsLabel), status: wordOf(r.Status), message: r.Message, solPct: r.SOLPct, impossible: r.Impossible,
		contended: r.Contended != ""}
	if p, ok := r.Primary(); ok {
		x.primary = wordOf(p)
	}
	for _, k := range r.MetricOrder {
		v, ok := r.Metrics[k]
		if !ok || results.DirectionOf(k) == results.Neutral {
			continue
		}
		if x.metrics == nil { // room for the rest, which are mostly directional too
			x.metrics = make([]value, 0, len(r.MetricOrder))
		}
		lo, hi, how, ok := r.Spread(k)
		if !ok && how != "" { // recorded, but no spread: judged without one
			j.ignored++
			if j.example == "" {
				j.example = r.Key() + " " + k + ": " + how
			}
			how = ""
		}
		x.metrics = append(x.metrics, value{name: wordOf(k), v: v, lo: lo, hi: hi, how: wordOf(how)})
	}
	j.x, j.ok = x, true
}

// finish records what the run says of itself once its rows are in: its names and the
// nodes its shards ran on.
func (s *Run) finish(run *results.Run) {
	s.Dir, s.RunID, s.SourceSHA = run.Dir, run.RunID, run.SourceSHA
	if first, _ := run.Ledger.Measured(); !first.IsZero() {
		s.At = first.UTC().Format(time.RFC3339)
	}
	s.countMeasured()
	var nodes []fingerprint.Node
	for _, sh := range run.Shards {
		if f := sh.Before; f != nil {
			nodes = append(nodes, f.Summary())
		} else if f := sh.After; f != nil {
			nodes = append(nodes, f.Summary())
		}
	}
	s.node, s.hasNode = fingerprint.Merge(nodes), len(nodes) > 0
}

// nothingMeasured says why the side has no measured case to compare ("" when it has):
// what its filter kept, and the values the filtered fields have in the run.
func (s *Run) nothingMeasured(side string) string {
	if s.Measured > 0 {
		return ""
	}
	var t verdict.Tally
	for i := range s.rows {
		t.Add(verdict.OfStatus(s.rows[i].status.String()), 1)
	}
	msg := fmt.Sprintf("%s: nothing measured to compare (%d rows in the run", side, s.Rows)
	if s.profiled > 0 {
		msg += fmt.Sprintf(", %d of them profiled (counters mode: timed by the profiler, left out)", s.profiled)
	}
	if len(s.keep) == 0 {
		return msg + fmt.Sprintf("; %d unsupported, %d error)", t.Unsupported, t.Error)
	}
	var filt, have []string
	for _, f := range slices.Sorted(maps.Keys(s.keep)) {
		filt = append(filt, f+"="+s.keep[f])
		vals := slices.Sorted(maps.Keys(s.present[f]))
		if len(vals) == mostValues {
			vals = append(vals, "...")
		}
		have = append(have, f+": "+strings.Join(vals, ", "))
	}
	return msg + fmt.Sprintf(", %d kept by --%s-filter %s: %d unsupported, %d error; values present: %s)",
		len(s.rows), side, strings.Join(filt, ","), t.Unsupported, t.Error, strings.Join(have, "; "))
}

// intern is the one copy of a string that many rows' groups repeat (testlists, ops,
// backends, clusters); statuses and metric names are words.
func intern(s string) string { return unique.Make(s).Value() }

func (x *entry) value(name word) (value, bool) {
	for _, v := range x.metrics {
		if v.name == name {
			return v, true
		}
	}
	return value{}, false
}

// FromRows is a side of a comparison made of rows already read — a stored run's cases,
// which opx serve compares — joined as base is (nil: a join of its own, on key): what
// Read makes of a run directory's rows, each row placed against its hardware's limits.
func FromRows(side Side, key []string, rows []results.Row, base *Run) *Run {
	out := newRun(key, nil)
	if base != nil {
		out.key, out.groups, out.keys = base.key, base.groups, base.keys
	}
	placeAgainstLimits(rows)
	out.add(rows, make([]judged, len(rows)))
	out.Side.Dir, out.Side.RunID, out.Side.SourceSHA, out.Side.At = side.Dir, side.RunID, side.SourceSHA, side.At
	out.countMeasured()
	return out
}

// placeAgainstLimits places each row against its hardware's limits (sol): impossible, and
// its % of the roofline.
func placeAgainstLimits(rows []results.Row) {
	for i := range rows {
		r := &rows[i]
		_, j, ok := r.SOL()
		r.Impossible = ok && j.Impossible
		if ok {
			r.SOLPct = j.SOL
		}
	}
}

// countMeasured counts the side's measured cases.
func (s *Run) countMeasured() {
	for i := range s.rows {
		if verdict.OfStatus(s.rows[i].status.String()) == verdict.Measured {
			s.Measured++
		}
	}
}
