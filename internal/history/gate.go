// The gate (--fail-on-regression): which changes fail it, what contended points ask for,
// and the newest run the last gate judged.

package history

// The gate: what opx history check --fail-on-regression fails on, and the record of the
// newest run a gate judged (so the next judges every run added since).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/verdict"
)

// Gate is --fail-on-regression's rule: the size of a slower change it fails on (Pct
// percent), how many newest runs' changes it also takes (Window), and whether it fails
// only on the night a change is new (NewOnly; by default it fails every night a change
// stands).
type Gate struct {
	Pct     float64
	Window  int
	NewOnly bool
}

// Regressions are the slower changes of at least pct percent the gate fails on, each
// judged by changes.Judged.Fails: every change that holds at its series' newest judged
// run and is slower by pct now — every night it stands, until the series recovers or the
// team marks it expected or invalid (open and acknowledged still fail); with newOnly,
// only those new at that run. With window > 1, also those (still holding) that start
// within the newest window runs (by time) up to the run under test. An uncorroborated
// change on its first night waits for a second run unless it is slower by twice pct
// (Change.waits, corroborate.go) — not with newOnly, whose one night is its first.
func (f *Found) Regressions(g Gate) []Change {
	pct, window, newOnly := g.Pct, g.Window, g.NewOnly
	recent := map[int64]bool{}
	if f.Newest != nil {
		recent[f.Newest.id] = true
		k := 0
		for _, r := range f.runs {
			if k < window && !r.At.After(f.Newest.At) {
				recent[r.id] = true
				k++
			}
		}
	}
	var out []Change
	for _, c := range f.Changes {
		if c.Triage == TriageExpected || c.Triage == TriageInvalid {
			continue // triaged as no regression: it no longer fails the gate
		}
		if c.Direction != compare.Slower || !newOnly && c.waits(pct) {
			continue // faster; or uncorroborated on its first night, and not large (corroborate.go)
		}
		if c.judged.Fails(pct, c.lower, newOnly) || (recent[c.run] && c.judged.Fails(pct, c.lower, false)) {
			out = append(out, c)
		}
	}
	return out
}

// UnderContention are the cases a judged run measured under contention that cannot pass:
// slower than their series' quiet level by at least pct percent, or with no quiet level to
// judge them by (a machine always busy never gates silently). The gate fails on them for
// their own reason — "measured under contention: re-measure" — never as a regression
// (check opens no change on them) and never silently.
func (f *Found) UnderContention(pct float64) []Contended {
	var out []Contended
	for _, c := range f.Contended {
		if c.Ratio == 0 || changes.Slower(c.Ratio, c.lower) >= pct/100 {
			out = append(out, c)
		}
	}
	return out
}

// notMeasured are the cases the gate fails on as not measured: those a judged run did not
// measure (error, missing), and those it no longer measures that it used to (unsupported
// now), as compare fails on them.
func (f *Found) notMeasured() []Stopped {
	out := slices.Clone(f.Unmeasured)
	for _, s := range f.Stopped {
		if s.Outcome == verdict.Unsupported.String() {
			out = append(out, s)
		}
	}
	return out
}

// NoLongerMeasured are the cases a judged run no longer measures that the run before it
// measured, unsupported now (error and missing ones are in Unmeasured): the gate fails on
// them.
func (f *Found) NoLongerMeasured() []Stopped {
	return f.notMeasured()[len(f.Unmeasured):]
}

// gatedName is the opx_history entry that records the newest run a gate of this filter
// judged ("gated", or "gated:k=v,..." for a filtered gate).
func gatedName(filter map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		parts = append(parts, k+"="+filter[k])
	}
	if len(parts) == 0 {
		return "gated"
	}
	return "gated:" + strings.Join(parts, ",")
}

// Gated is the newest run (its store id) an earlier gate of this filter judged, 0 when
// none has: CheckOptions.Since.
func (s *Store) Gated(ctx context.Context, filter map[string]string) (int64, error) {
	var v string
	err := s.db.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = ?"), gatedName(filter)).Scan(&v)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: the gate's record %q is not a run: the store was edited or damaged", s.Where, v)
	}
	return id, nil
}

// MarkGated records that a gate of this filter judged every run up to r: the next judges
// the runs added after it. A record never moves back (two gates at once keep the newer).
func (s *Store) MarkGated(ctx context.Context, filter map[string]string, r *RunRef) error {
	prev, err := s.Gated(ctx, filter)
	if err != nil || prev >= r.id {
		return err
	}
	up := "INSERT INTO opx_history (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
	if _, err := s.db.ExecContext(ctx, s.q(up), gatedName(filter), strconv.FormatInt(r.id, 10)); err != nil {
		return fmt.Errorf("%s: recording the gate: %w", s.Where, err)
	}
	return nil
}
