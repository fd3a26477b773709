package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/semianalysis/opx/internal/files"
)

// Accounting is accounting.json (beyond the seed), beside execution.json in a shard's
// output: when the shard asked for its allocation, when it was granted and released, the
// GPUs it held, and each phase's start and end. execute rewrites it, atomically, at every
// event, so an execution killed by SIGKILL leaves what it had reached; finalize (run by
// execute, opx finalize, opx recover or opx run --resume) adds the cleanup phase and the
// release it confirmed.
type Accounting struct {
	Runner string `json:"runner"`
	// GPUs is what the allocation held: the node's GPUs on a Slurm runner (an exclusive
	// node), the ranks on the local runner.
	GPUs        int        `json:"gpus"`
	Job         string     `json:"job,omitempty"`
	StartedAt   *time.Time `json:"started_at"`             // execute began
	SubmittedAt *time.Time `json:"submitted_at,omitempty"` // salloc started
	GrantedAt   *time.Time `json:"granted_at,omitempty"`   // salloc returned with the job (the local runner: its ranks started)
	ReleasedAt  *time.Time `json:"released_at,omitempty"`  // the allocation confirmed gone (the local runner: its ranks ended)
	Phases      []Phase    `json:"phases"`
}

// Phase is one phase of an execution: stage, allocation, import, ncu, benchmark, cleanup.
type Phase struct {
	Name  string     `json:"name"`
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end,omitempty"` // nil: the execution ended (or is) inside it
}

// AccountingFile is the file's name in a shard's output directory.
const AccountingFile = "accounting.json"

// ReadAccounting reads an accounting.json; a missing file is (nil, nil): an execution
// from before opx recorded one, or from ci.py.
func ReadAccounting(ctx context.Context, path string) (*Accounting, error) {
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Accounting
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: not an accounting file: %w", path, err)
	}
	if a.GPUs < 0 || a.StartedAt == nil {
		return nil, fmt.Errorf("%s: not an accounting file: it needs started_at and gpus ≥ 0", path)
	}
	return &a, nil
}

// Write writes the file atomically.
func (a *Accounting) Write(path string) error { return files.WriteIndented(path, a) }

// Begin starts a phase at t.
func (a *Accounting) Begin(name string, t time.Time) {
	a.Phases = append(a.Phases, Phase{Name: name, Start: t.UTC()})
}

// End ends the newest phase of that name still open.
func (a *Accounting) End(name string, t time.Time) {
	for i := len(a.Phases) - 1; i >= 0; i-- {
		if p := &a.Phases[i]; p.Name == name && p.End == nil {
			u := t.UTC()
			p.End = &u
			return
		}
	}
}

// Last is the latest moment the file records.
func (a *Accounting) Last() time.Time {
	last := *a.StartedAt
	for _, t := range []*time.Time{a.SubmittedAt, a.GrantedAt, a.ReleasedAt} {
		if t != nil && t.After(last) {
			last = *t
		}
	}
	for _, p := range a.Phases {
		if p.Start.After(last) {
			last = p.Start
		}
		if p.End != nil && p.End.After(last) {
			last = *p.End
		}
	}
	return last
}

// Held is how long the allocation was held, granted to released. An allocation never
// granted held nothing. One whose release was never recorded (the execution was killed
// and not finalized yet) is counted to the last moment recorded, and estimated says so.
func (a *Accounting) Held() (held time.Duration, estimated bool) {
	if a.GrantedAt == nil {
		return 0, false
	}
	end := a.ReleasedAt
	if end == nil {
		last := a.Last()
		end, estimated = &last, true
	}
	return max(0, end.Sub(*a.GrantedAt)), estimated
}

// Pending is how long the shard waited for its allocation (salloc's start to its grant).
func (a *Accounting) Pending() time.Duration {
	if a.SubmittedAt == nil || a.GrantedAt == nil {
		return 0
	}
	return max(0, a.GrantedAt.Sub(*a.SubmittedAt))
}

// GPUSeconds is the allocation's cost: its GPUs times how long it was held.
func (a *Accounting) GPUSeconds() (float64, bool) {
	held, est := a.Held()
	return held.Seconds() * float64(a.GPUs), est
}

// PhaseSeconds is the time spent in the named phase (summed over its entries); an open
// phase counts to the last moment recorded.
func (a *Accounting) PhaseSeconds(name string) float64 {
	var s time.Duration
	for _, p := range a.Phases {
		if p.Name != name {
			continue
		}
		end := a.Last()
		if p.End != nil {
			end = *p.End
		}
		s += max(0, end.Sub(p.Start))
	}
	return s.Seconds()
}
