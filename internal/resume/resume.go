// Package resume plans the attempt that measures only what a run is still missing, from its case
// ledger, with the reason each case is rerun.
//
// It plans the attempt that measures only what a run is still missing: from
// the case ledger (results.Ledger) of every attempt so far, a manifest of the same run
// whose cells hold only the cases with no ok or unsupported row, and for each such case
// why it is run again. opx run --resume and opx plan --resume both use it.
package resume

import (
	"context"
	"fmt"
	"strconv"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Plan is a resume attempt: its manifest, the cases it reruns and why.
type Plan struct {
	Attempt  int
	Manifest *pyjson.Object // the run's manifest with only the cells and cases to rerun
	Cells    int            // cells in it
	Shapes   int            // case shapes in it (a shape runs on every backend of its cell)
	Reasons  []Reason       // one per ledger case rerun
	Run      *results.Run   // the run as read, all attempts
}

// Reason is why a case is rerun.
type Reason struct {
	Key, Shard, Why string
}

// Make reads the run (the manifest and every attempt under artifacts) and plans attempt
// (0: one after the newest attempt found).
func Make(ctx context.Context, manifestPath, artifacts string, attempt int) (*Plan, error) {
	run, err := results.Cover(ctx, manifestPath, artifacts)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Load(ctx, manifestPath)
	if err != nil {
		return nil, err
	}
	newest := 0
	for _, a := range run.Ledger.Attempts {
		newest = max(newest, a.Attempt)
	}
	if attempt == 0 {
		attempt = newest + 1
	}
	if attempt <= newest {
		return nil, fmt.Errorf("attempt %d is not after the newest attempt found (%d): resume needs a new attempt number", attempt, newest)
	}
	p := &Plan{Attempt: attempt, Run: run}
	byShard := map[string][]results.Case{}
	for c := range run.Ledger.Cases() {
		byShard[c.Shard] = append(byShard[c.Shard], *c)
	}
	attempts := map[string][]results.Attempt{}
	for _, a := range run.Ledger.Attempts {
		attempts[a.Shard] = append(attempts[a.Shard], a)
	}
	out := pyjson.NewObject()
	for _, mem := range m.Raw.Members() {
		out.Set(mem.Key, mem.Value)
	}
	att := strconv.Itoa(attempt)
	if _, ok := out.Get("attempt"); ok {
		out.Set("attempt", att)
	}
	var include []pyjson.Value
	for _, cell := range m.Cells {
		keep, reasons, err := rerun(cell, byShard[cell.ID], attempts[cell.ID])
		if err != nil {
			return nil, err
		}
		if len(keep) == 0 {
			continue
		}
		p.Reasons = append(p.Reasons, reasons...)
		include = append(include, trimmed(cell, keep, att, m.RunID))
		p.Cells++
		p.Shapes += len(keep)
	}
	if include == nil {
		include = []pyjson.Value{}
	}
	out.Set("include", include)
	p.Manifest = out
	return p, nil
}

// rerun is the indexes of the cell's shapes to run again — a shape any of whose cases
// (one per backend) is not done — and the reason for each case not done.
func rerun(cell *manifest.Cell, ledger []results.Case, attempts []results.Attempt) ([]int, []Reason, error) {
	state := map[string]results.Case{}
	for _, c := range ledger {
		state[c.Key] = c
	}
	var keep []int
	var reasons []Reason
	said := map[string]bool{}
	for si := range cell.Cases {
		cases, err := results.ShapeCases(cell, si)
		if err != nil {
			return nil, nil, err
		}
		again := false
		for _, c := range cases {
			got, known := state[c.Key]
			if known && got.Done() {
				continue
			}
			again = true
			if !said[c.Key] {
				said[c.Key] = true
				reasons = append(reasons, Reason{Key: c.Key, Shard: cell.ID, Why: why(got, attempts)})
			}
		}
		if again {
			keep = append(keep, si)
		}
	}
	return keep, reasons, nil
}

// why says why a case is run again.
func why(c results.Case, attempts []results.Attempt) string {
	if c.Outcome() == verdict.Error {
		msg := c.Message
		if msg == "" {
			msg = "no message"
		}
		return fmt.Sprintf("error in attempt %d: %s", c.Attempt, msg)
	}
	if len(attempts) == 0 {
		return "missing: the shard never ran"
	}
	last := attempts[len(attempts)-1]
	switch {
	case last.Outcome == verdict.Unfinished:
		return fmt.Sprintf("missing: attempt %d ended before it (killed: no status.json)", last.Attempt)
	case last.Exited0:
		return fmt.Sprintf("missing: attempt %d finished without a row for it", last.Attempt)
	}
	f := last.Failure
	if f == "" {
		f = "failed"
	}
	return fmt.Sprintf("missing: attempt %d ended before it (%s)", last.Attempt, f)
}

// trimmed is the cell with only the kept cases and the new attempt's queue token. Its id
// stays the shard's: the attempt's rows join the shard's earlier ones in the ledger.
func trimmed(cell *manifest.Cell, keep []int, attempt, runID string) *pyjson.Object {
	o := manifest.Narrow(cell.Raw, keep)
	if _, ok := o.Get("queue-token"); ok {
		o.Set("queue-token", manifest.QueueToken(runID, attempt, cell.ID))
	}
	return o
}
