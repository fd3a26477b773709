package report

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

// costView is the page's account of the case ledger: what every attempt's allocation held
// and cost, and the cases still missing.
type costView struct {
	Line, Note  string
	Attempts    []attemptRow
	Missing     []missingRow
	MoreMissing int
	// SetAside is the attempts' evidence that could not be read (results.Ledger.SetAside):
	// the first of it, and how many more.
	SetAside     []string
	MoreSetAside int
}

type attemptRow struct {
	Shard, Attempt, Outcome, Class, GPUs, Waited, Held, GPUHours, PerRow, Import, Benchmark, Cleanup, Rows, Dir string
}

type missingRow struct{ Key, Status, Message string }

func cost(run *results.Run) costView {
	l := run.Ledger
	v := costView{Line: l.Line()}
	t := l.Totals()
	v.Note = fmt.Sprintf("Every attempt's allocation, granted to released, times the GPUs it held (an exclusive node: all of them); waiting for it (%s s in all) is not GPU time. Each attempt's GPU time is shared equally by the rows it wrote (by the cases it was asked to run when it wrote none), so the cases' GPU-seconds add up to the attempts'.", secs(t.PendingSeconds))
	if l.CPU {
		v.Note = "Every attempt's benchmark on this machine, start to end, times the processes it ran (one per rank, each on the machine's CPU). Each attempt's CPU time is shared equally by the rows it wrote (by the cases it was asked to run when it wrote none), so the cases' CPU-seconds add up to the attempts'."
	}
	for _, a := range l.Attempts {
		row := attemptRow{Shard: a.Shard, Attempt: strconv.Itoa(a.Attempt), Outcome: a.Outcome, Class: a.Outcome,
			Rows: fmt.Sprintf("%d / %d", a.Rows, a.Cases), Dir: a.Dir}
		if rel, err := filepath.Rel(run.Dir, a.Dir); err == nil {
			row.Dir = rel
		}
		if a.Outcome == "unfinished" {
			row.Class = "failed"
		}
		if !a.Accounted {
			row.GPUs, row.Waited, row.Held, row.GPUHours, row.PerRow = "—", "—", "—", "not recorded", "—"
			row.Import, row.Benchmark, row.Cleanup = "—", "—", "—"
		} else {
			row.GPUs, row.Waited, row.Held = strconv.Itoa(a.GPUs), secs(a.Pending), secs(a.Held)
			row.GPUHours, row.PerRow = results.Hours(a.GPUSeconds), secs(a.Share())
			if a.Estimated {
				row.Held += " (to the last event: release not recorded)"
			}
			row.Import, row.Benchmark, row.Cleanup = secs(a.Phases["import"]), secs(a.Phases["benchmark"]), secs(a.Phases["cleanup"])
		}
		v.Attempts = append(v.Attempts, row)
	}
	for _, c := range l.Missing {
		v.Missing = append(v.Missing, missingRow{Key: c.Key, Status: c.Status, Message: safe.Trunc(c.Message, 300)})
	}
	v.MoreMissing = l.MoreMissing
	v.SetAside, v.MoreSetAside = l.SetAside()
	return v
}

func secs(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 10:
		return strconv.FormatFloat(s, 'f', 2, 64)
	}
	return strconv.FormatFloat(s, 'f', 0, 64)
}
