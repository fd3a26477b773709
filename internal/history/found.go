// What opx history check reports (Found): its options, the changes it found with what
// changed under them, what was not measured, what is too young, contended or judged by
// kind — the types the renderers (Markdown, JUnit, JSON, the page) and the gate read.

package history

import (
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
)

// CheckOptions say what check reads and how it judges.
type CheckOptions struct {
	changes.Options
	// Lookback is how many of each series' newest points are read (a bounded window).
	Lookback int
	// All checks every series; otherwise only those the newest run touched.
	All bool
	// Filter keeps the series whose fields (testlist, op, args, backend, world_size,
	// cluster) have these values.
	Filter map[string]string
	// Run is the run under test (its run id; the newest added of that id): what is new
	// at it is what the gate judges. "" is the run added last (not the one dated last: a
	// run's claimed time never makes it the run under test).
	Run string
	// Since is, for the gate, the newest run (its store id) an earlier gate judged: every
	// run added after it, up to the run under test, is judged too (a night whose check did
	// not run, two sweeps sharing a store). 0: the run under test alone.
	Since int64
}

// DefaultLookback is how many runs of each series check reads by default.
const DefaultLookback = 60

// Found is what check found.
type Found struct {
	Series int `json:"series"`
	Points int `json:"points"`
	// Newest is the run under test (CheckOptions.Run, else the run added last).
	Newest  *RunRef   `json:"newest_run"`
	Changes []Change  `json:"changes"`
	Stopped []Stopped `json:"stopped"`
	// Unmeasured are the series the run under test holds but did not measure (error,
	// missing): the gate fails on them, as compare does.
	Unmeasured []Stopped `json:"unmeasured"`
	// MeasuredAtTest counts the series a judged run measured (their newest point): none,
	// with series to judge, is a run that measured nothing, and the gate fails.
	MeasuredAtTest int `json:"measured_at_test"`
	// Contended are the series a judged run measured under contention (another opx run on
	// its machine, a busy machine): never the evidence of a change; the gate fails on those
	// slower than their quiet level, asking for them to be measured again.
	Contended []Contended `json:"contended"`
	// Young are the series the run under test touched that have too few measured runs
	// to be judged yet.
	Young []YoungSeries `json:"young"`
	// FilterValues are, when the filter matched no series, the values each filtered
	// field has in the store.
	FilterValues map[string][]string `json:"filter_values,omitempty"`
	// Cleared are suspects a confirmation run measured at their old level elsewhere: noise,
	// or the node that measured them (when it was the odd one out for several at once).
	Cleared []Cleared `json:"cleared"`
	// ByKind are the series a judged run measured on a kind of machine whose level in the
	// series is its own (a pool of machines that differ): judged against that level, so a
	// change of the pool's mix is not a change (changes.Kinds).
	ByKind []KindLevel `json:"judged_by_kind"`
	// Alerts are the changes grouped as a team triages them: those of one run that share
	// their first run, cluster, direction and what changed under them (corroborate.go).
	Alerts []Alert `json:"alerts"`
	// OddNodes counts, per node, the changes confined to it: a node that is repeatedly
	// the odd one out.
	OddNodes map[string]int `json:"odd_nodes"`
	// ServeURL is the team's opx serve (OPX_SERVE_URL): the Markdown links each change to
	// its page there.
	ServeURL string `json:"-"`
	// Gate is the gate's rule when one was asked for: the Markdown lists what fails it.
	Gate *Gate `json:"-"`
	// Judged are the runs the check judged: the run under test and every run added since
	// the last gate (CheckOptions.Since), newest first.
	Judged []RunRef `json:"judged_runs"`
	runs   []RunRef // every run, newest first
	gated  map[int64]bool
	series []*seriesRow // what was read, for the page
	byID   map[int64]RunRef
	// measuredAt counts the series each judged run measured, by sibling key (corroborate)
	measuredAt siblingsAt
}

// Contended is a series' newest point measured under contention: Why, and its value
// against the series' quiet level (Ratio new/level, Speedup above 1 faster; 0 when the
// series has no quiet level yet).
type Contended struct {
	Key     string  `json:"key"`
	RunID   string  `json:"run_id"`
	Why     string  `json:"why"`
	Ratio   float64 `json:"ratio,omitempty"`
	Speedup float64 `json:"speedup,omitempty"`
	lower   bool
}

// A change's status: Suspected until ConfirmAfter runs hold its new level (or a
// confirmation run reproduces it), then Confirmed; its Direction is compare's words,
// compare.Slower or compare.Faster.
const (
	Suspected = "suspected"
	Confirmed = "confirmed"
)

// What a series knows of a change of machine (Change.Machines).
const (
	MachinesExplained   = "explained"
	MachinesNewKind     = "new_kind"
	MachinesUnexplained = "unexplained"
)

// machinesWords are how the Markdown says each.
var machinesWords = map[string]string{
	MachinesExplained:   "the new kind's earlier runs put it here: not a change of the code's speed",
	MachinesNewKind:     "a kind this series never ran on: not judged until a run on the old kind tells whether the code moved",
	MachinesUnexplained: "not where the new kind's earlier runs put it: the code moved too",
}

// machinesOf is what the series knows of a change of machine ("" when the machines did
// not change with the level).
func machinesOf(c changes.Change) string {
	switch {
	case c.Mix == "":
		return ""
	case c.Explained:
		return MachinesExplained
	case c.NewKind:
		return MachinesNewKind
	}
	return MachinesUnexplained
}

// machineOnly is whether the change is a change of machine and nothing the series can
// lay on the code (explained, or onto a kind it never ran on).
func (c Change) machineOnly() bool {
	return c.Machines == MachinesExplained || c.Machines == MachinesNewKind
}

// KindLevel is a series' newest run on a kind of machine with a level of its own there:
// Ratio (of the metric) to the level of the series' most frequent kind, Of, and how many of
// the series' newest 10 runs ran on it.
type KindLevel struct {
	Key    string  `json:"key"`
	Kind   string  `json:"kind"`
	Of     string  `json:"of"`
	Ratio  float64 `json:"ratio"`
	Recent int     `json:"of_newest_10"`
}

// YoungSeries is a series that cannot be judged yet: it has Runs measured runs and
// needs Needs.
type YoungSeries struct {
	Key   string `json:"key"`
	Runs  int    `json:"runs"`
	Needs int    `json:"needs"`
}

// RunRef names a run in the store.
type RunRef struct {
	RunID  string    `json:"run_id"`
	At     time.Time `json:"at"`
	id     int64
	origin string // with RunID, the run's identity (two runs may share a second)
}

// Name is how a run is shown: its id and time ("nightly-12 of 2026-11-09T02:00Z").
func (r RunRef) Name() string { return r.RunID + " of " + r.At.UTC().Format("2006-01-02T15:04Z") }

// Change is one shift found in a series.
type Change struct {
	// ID is the change's stable id (ChangeID): the same shift has the same id in every
	// check, so triage (Triage) follows it.
	ID  string `json:"id"`
	Key string `json:"key"`
	// the case's fields: where it ran, on what, which op
	Testlist  string  `json:"testlist"`
	Op        string  `json:"op"`
	Backend   string  `json:"backend"`
	Cluster   string  `json:"cluster"`
	Metric    string  `json:"metric"`
	RunID     string  `json:"run_id"` // the first run of the new level
	At        string  `json:"at"`
	Direction string  `json:"direction"` // slower | faster
	Ratio     float64 `json:"ratio"`     // new level / old level of the metric
	Speedup   float64 `json:"speedup"`   // above 1 is faster, as compare says it
	P         float64 `json:"p"`
	Status    string  `json:"status"` // confirmed | suspected
	Before    float64 `json:"before"` // the old and new levels (medians)
	After     float64 `json:"after"`
	Runs      int     `json:"runs_after"` // runs of the new level so far
	// Provenance is what differs between the runs just before and just after the shift.
	Provenance map[string]Diff `json:"provenance"`
	// Nodes are where the shift shows, when it is confined to some of the nodes that
	// measured the new level.
	Nodes []string `json:"nodes"`
	// MachinesChanged is set when the kinds of machine changed with the level (the old
	// level's runs and the new one's on different recorded kinds, none on both sides:
	// "MI300X at 2100 MHz → MI300X at 1900 MHz"; changes.Change.Mix), and Machines says
	// what the series knows of it: MachinesExplained (the new kinds' own earlier runs put
	// them at the new level: a change of machine, not of the code), MachinesNewKind (a new
	// kind never ran earlier in the series: not judged, as a series too young; a run on the
	// old kind tells) — neither fails the gate — or MachinesUnexplained (the new kinds'
	// earlier runs put them elsewhere: the code moved too, and it gates as any change).
	MachinesChanged string `json:"machines_changed,omitempty"`
	Machines        string `json:"machines,omitempty"`
	// Confirmation is what a confirmation run on another node said of a suspect ("" when
	// none was run): "confirmed by run R on node-c".
	Confirmation string `json:"confirmation,omitempty"`
	// Corroboration is, on a change's first night, what its sibling cases (the same op on
	// the same cluster, measured by the same run) or a confirmation run said of it:
	// "3 of 40 sibling cases moved with it", "none of 40 …" (then Uncorroborated: the gate
	// waits for a second run unless it is large; corroborate.go). "" when there was none
	// to ask, or after its first night.
	Corroboration  string `json:"corroboration,omitempty"`
	Uncorroborated bool   `json:"uncorroborated"`
	// New is whether the change is new at the run under test: the same check as of the
	// series' run before it did not report it (changes.Same).
	New bool `json:"new"`
	// Holds is whether the run under test measured the new level (nearer it than the
	// old one).
	Holds bool `json:"holds"`
	// RatioNow is the change's size now: the series' newest level over the old level (a
	// drift keeps growing after its first night); SpeedupNow says it as compare does.
	RatioNow   float64 `json:"ratio_now"`
	SpeedupNow float64 `json:"speedup_now"`
	// Triage is the change's latest triage state (open when none was recorded), its
	// events oldest first.
	Triage       string        `json:"triage"`
	TriageEvents []TriageEvent `json:"triage_events,omitempty"`
	at           time.Time
	cluster      string // the series' cluster (local@HOST for a local run's)
	caseKey      string // the case's key in its run's files (cluster "local" for local@HOST)
	run          int64
	series, cell int64
	measuredOn   []string // the nodes that measured the new level
	kindsOn      []string // and their kinds of machine ("" where none was recorded)
	judged       changes.Judged
	lower        bool
	aliases      []string // the ids of the same change dated a run or two apart (triage follows it)
}

// RunName is how the change's first run is shown: its id and time, and for a local
// run (whose id says nothing of where it ran) its time and machine: "2026-11-09T02:00Z
// (local@host)".
func (c Change) RunName() string {
	t := c.at.UTC().Format("2006-01-02T15:04Z")
	if c.RunID == "" || c.RunID == LocalRunner {
		return t + " (" + c.cluster + ")"
	}
	return c.RunID + " of " + t
}

// Diff is one field's values before and after a shift.
type Diff struct {
	Before string `json:"before"`
	After  string `json:"after"`
}

// Stopped is a series whose newest run did not measure it, though the one before did.
type Stopped struct {
	Key     string `json:"key"`
	RunID   string `json:"run_id"`
	Outcome string `json:"outcome"`
}
