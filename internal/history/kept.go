// The check kept for the dashboard: opx history add makes the check of the store's newest
// run (NewestCheck) once it has added its runs, and keeps it in the store beside the state
// it is of; opx serve shows it as soon as it sees that state, instead of judging every
// series again while its pages show the check before (a nightly add of 128,000 cases:
// tens of seconds). A kept check is read only by the opx that wrote it (another opx's
// detector may judge otherwise): any other, or a store an older opx added to since, is
// judged again by the reader, as before.

package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/version"
)

// keptFormat is how a kept check is written (the JSON of kept, gzipped): a reader of
// another format, or of another opx version, judges the store itself.
const keptFormat = "1"

// keptBy names the opx and format that kept a check: its version, and where that does not
// say which code it is (a build of no known commit, or of a tree changed since its commit)
// a digest of the executable itself — two such builds never read each other's check.
var keptBy = sync.OnceValue(func() string {
	by := version.String() + " format " + keptFormat
	modified := false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, st := range info.Settings {
			modified = modified || st.Key == "vcs.modified" && st.Value == "true"
		}
	}
	if !modified && version.Commit != "unknown" && !strings.Contains(by, "unknown commit") {
		return by // a release of a clean tree, or a build of a known commit
	}
	h := sha256.New()
	exe, err := os.Executable()
	f, err2 := os.Open(exe)
	if err != nil || err2 != nil {
		return by + " process " + strconv.Itoa(os.Getpid()) + " " + time.Now().String() // never read again
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return by + " process " + strconv.Itoa(os.Getpid()) + " " + time.Now().String()
	}
	return by + " build " + hex.EncodeToString(h.Sum(nil)[:8])
})

// keptRevision is the store revision that holds kept checks (the checks table).
const keptRevision = 4

// kept is a check as it is kept: what check reports (Found's JSON) and what a reader
// needs of its changes beyond it (the ids their triage may be recorded under).
type kept struct {
	Found   *Found              `json:"found"`
	Aliases map[string][]string `json:"aliases,omitempty"`
}

// NewestCheck is the check of the store's newest run with the default options, as the
// dashboard shows it and as add keeps it.
func (s *Store) NewestCheck(ctx context.Context) (*Found, error) {
	return s.Check(ctx, CheckOptions{Options: changes.Defaults})
}

// KeepCheck makes the check of the store as it is now (NewestCheck) and keeps it, in
// place of the one kept before. When another writer changed the store while it was being
// made, nothing is kept (that writer keeps its own). It returns how many series it
// judged.
func (s *Store) KeepCheck(ctx context.Context) (int, error) {
	if s.reader || s.rev < keptRevision {
		return 0, errors.New(s.Where + ": a store opened to read, or of an older revision, keeps no check")
	}
	state, err := s.State(ctx)
	if err != nil {
		return 0, err
	}
	f, err := s.NewestCheck(ctx)
	if err != nil {
		return 0, err
	}
	k := kept{Found: f, Aliases: map[string][]string{}}
	for _, c := range f.Changes {
		if len(c.aliases) > 0 {
			k.Aliases[c.ID] = c.aliases
		}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return 0, fmt.Errorf("%s: keeping the check: %w", s.Where, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer tx.Rollback()
	if now, err := s.stateIn(ctx, tx); err != nil || now != state {
		if err != nil {
			return 0, err
		}
		return f.Series, nil // another add since: it keeps the check of what it made
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM checks"); err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO checks (state, made_by, made_at, body) VALUES (?, ?, ?, ?)"),
		state, keptBy(), time.Now().Unix(), gz(b)); err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	return f.Series, nil
}

// KeptCheck is the check kept for the store in state (State), when this opx kept one for
// it; nil when none was (a store of an older revision, a state no writer of this opx kept
// a check of). Its changes' triage is as when it was kept: Triaged reads it again.
func (s *Store) KeptCheck(ctx context.Context, state string) (*Found, error) {
	if s.rev < keptRevision { // revised since it was opened (a newer add), or not
		var v string
		err := s.db.QueryRowContext(ctx, "SELECT value FROM opx_history WHERE name = 'revision'").Scan(&v)
		if rev, _ := strconv.Atoi(v); err != nil || rev < keptRevision {
			return nil, nil
		}
	}
	var body []byte
	err := s.db.QueryRowContext(ctx, s.q("SELECT body FROM checks WHERE state = ? AND made_by = ?"), state, keptBy()).Scan(&body)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading the kept check: %w", s.Where, err)
	}
	b, err := gunzip(body)
	if err != nil {
		return nil, fmt.Errorf("%s: the kept check: %w", s.Where, err)
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: the kept check: %w", s.Where, err)
	}
	if k.Found == nil {
		return nil, fmt.Errorf("%s: the kept check holds no check", s.Where)
	}
	f := k.Found
	for i := range f.Changes {
		c := &f.Changes[i]
		c.aliases, c.cluster = k.Aliases[c.ID], c.Cluster
		c.at, _ = time.Parse(time.RFC3339, c.At)
	}
	f.Alerts = f.alerts() // as kept, with the names their lines say
	return f, nil
}
