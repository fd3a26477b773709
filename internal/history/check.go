package history

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/verdict"
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
	// "MI300X at 2100 MHz → MI300X at 1900 MHz"): a change of machine, not of the code's
	// speed, and it never fails the gate (changes.Change.Mix).
	MachinesChanged string `json:"machines_changed,omitempty"`
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

// finding is a change found in a series, before confirmation runs settle it.
type finding struct {
	se *seriesRow
	ch Change
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

// seriesRow is a series as check reads it.
type seriesRow struct {
	id                               int64
	key, testlist, op, args, backend string
	cluster, metric                  string
	ws                               int
	lower                            bool
	points                           []stored // newest last
	obs                              []changes.Obs
	measured                         []int    // indexes in points of obs
	busyRun                          int64    // the newest run that measured it under contention (0: none)
	changes                          []Change // what check found in it
	// what the page lists of it (summarize): its points are let go after the first pass
	npoints int
	latest  string
	trend   float64
}

type stored struct {
	at, run       int64
	outcome       verdict.Outcome
	value, lo, hi sql.NullFloat64
	ctx, cell     int64
}

// Check reads the series to judge (those the run under test touched, or all), a bounded
// window of each, and finds their changes, each series on its own.
func (s *Store) Check(ctx context.Context, o CheckOptions) (*Found, error) {
	if o.Lookback <= 0 {
		o.Lookback = DefaultLookback
	}
	f := &Found{OddNodes: map[string]int{}, Changes: []Change{}, Stopped: []Stopped{}, Cleared: []Cleared{}, Unmeasured: []Stopped{}, Young: []YoungSeries{}, ByKind: []KindLevel{}, Alerts: []Alert{}, measuredAt: siblingsAt{}}
	runs, err := s.runs(ctx)
	if err != nil {
		return nil, err
	}
	f.runs = runs
	byID := map[int64]RunRef{}
	for _, r := range runs {
		byID[r.id] = r
	}
	if len(runs) == 0 {
		return f, nil
	}
	test, err := underTest(runs, o.Run, s.Where)
	if err != nil {
		return nil, err
	}
	f.Newest = &test
	f.gated = map[int64]bool{test.id: true}
	f.Judged = []RunRef{test}
	for _, r := range runs {
		if o.Since > 0 && r.id > o.Since && r.id < test.id {
			f.gated[r.id] = true
			f.Judged = append(f.Judged, r)
		}
	}
	series, err := s.seriesToCheck(ctx, o, f.gated)
	if err != nil {
		return nil, err
	}
	if len(series) == 0 && len(o.Filter) > 0 {
		if f.FilterValues, err = s.filterValues(ctx, o); err != nil {
			return nil, err
		}
	}
	ctxs, err := s.contexts(ctx)
	if err != nil {
		return nil, err
	}
	meta, err := s.runMeta(ctx)
	if err != nil {
		return nil, err
	}
	f.Series, f.series, f.byID = len(series), series, byID
	// a batch of series at a time: each is judged on its own, and its points are let go
	// unless it changed (the page draws it), so a check of any size holds one batch
	var findings []finding
	batch := checkBatch(o.Lookback)
	for start := 0; start < len(series); start += batch {
		part := series[start:min(len(series), start+batch)]
		if err := s.window(ctx, part, o.Lookback); err != nil {
			return nil, err
		}
		// each series judged on every core (its own work alone), then taken in order
		err := par.Ordered(ctx, len(part), 0, func(ctx context.Context, i int) ([]changes.Judged, error) {
			se := part[i]
			if err := se.load(ctxs, byID, s.Where); err != nil {
				return nil, err
			}
			return se.judge(f.gated, o.Options), nil
		}, func(i int, found []changes.Judged) error {
			se := part[i]
			f.Points += len(se.points)
			se.atTest(f, byID, ctxs, o.Options)
			se.summarize()
			if len(found) == 0 {
				se.points, se.obs, se.measured = nil, nil, nil
				return nil
			}
			findings = append(findings, se.changesOf(found, byID, ctxs, meta, o)...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	kept, err := s.settle(ctx, f, findings, ctxs)
	if err != nil {
		return nil, err
	}
	for _, k := range kept {
		for _, n := range k.ch.Nodes {
			f.OddNodes[n]++
		}
		f.Changes = append(f.Changes, k.ch)
		k.se.changes = append(k.se.changes, k.ch)
	}
	sort.SliceStable(f.Changes, func(i, j int) bool { return worse(f.Changes[i], f.Changes[j]) })
	if err := s.triaged(ctx, f.Changes); err != nil {
		return nil, err
	}
	f.corroborate()
	f.Alerts = f.alerts()
	return f, nil
}

// underTest is the run check judges: the newest added with the run id asked for, else
// the newest added of all.
func underTest(runs []RunRef, runID, where string) (RunRef, error) {
	var best *RunRef
	for i := range runs {
		r := &runs[i]
		if (runID == "" || r.RunID == runID) && (best == nil || r.id > best.id) {
			best = r
		}
	}
	if best == nil {
		return RunRef{}, fmt.Errorf("--run %s: %s holds no run of that id", safe.Text(runID), where)
	}
	return *best, nil
}

// atTest notes what the judged run that measured the series last (the run under test, or
// one added since the last gate) says of it: not measured by it (an error or missing: the
// gate fails), no longer measured (measured by the run before: unsupported now fails the
// gate too), or too young to judge.
func (se *seriesRow) atTest(f *Found, byID map[int64]RunRef, ctxs map[int64]context_, o changes.Options) {
	n := len(se.points)
	if n == 0 || !f.gated[se.points[n-1].run] {
		return
	}
	test := byID[se.points[n-1].run]
	last := se.points[n-1].outcome
	if last == verdict.Measured {
		f.MeasuredAtTest++
		f.measuredAt.add(se.points[n-1].run, sibling{se.op, se.cluster})
		if why := ctxs[se.points[n-1].ctx].Contended; why != "" {
			// judged against the series' quiet level: the gate asks for it again when slower
			c := Contended{Key: se.key, RunID: test.RunID, Why: why, lower: se.lower}
			if k := len(se.obs); k > 0 { // the median of its newest 3 quiet points
				v, level := se.points[n-1].value.Float64, math.Exp(changes.Level(se.obs, max(0, k-3), k))
				c.Ratio, c.Speedup = v/level, level/v
				if !se.lower {
					c.Speedup = v / level
				}
			}
			f.Contended = append(f.Contended, c)
		}
	}
	if last == verdict.Error || last == verdict.Missing {
		f.Unmeasured = append(f.Unmeasured, Stopped{Key: se.key, RunID: test.RunID, Outcome: last.String()})
	}
	if n >= 2 && last != verdict.Measured && se.points[n-2].outcome == verdict.Measured {
		f.Stopped = append(f.Stopped, Stopped{Key: se.key, RunID: test.RunID, Outcome: last.String()})
	}
	if k := len(se.obs); k > 0 && last == verdict.Measured && ctxs[se.points[n-1].ctx].Contended == "" {
		newest, kinds := se.obs[k-1].Kind, changes.Kinds(se.obs, o)
		for _, kd := range kinds {
			if kd.Key == newest && kd.Ratio != 1 {
				recent := 0
				for _, x := range se.obs[max(0, k-10):] {
					if x.Kind == newest {
						recent++
					}
				}
				f.ByKind = append(f.ByKind, KindLevel{Key: se.key, Kind: newest, Of: kinds[0].Key, Ratio: kd.Ratio, Recent: recent})
			}
		}
	}
	if young, needs := changes.Young(len(se.obs)); young && last == verdict.Measured {
		f.Young = append(f.Young, YoungSeries{Key: se.key, Runs: len(se.obs), Needs: needs})
	}
}

// judge is the series' changes, judged at its newest run (changes.AtNewest) when a judged
// run (the run under test, or one added since the last gate) measured it last, else only
// found (nothing of it is new, or holds, at a judged run).
//
// A judged run that measured it under contention leaves its quiet points as they were, and
// judges them: a change that stood before a contended night still stands on it (that night
// is no evidence of a recovery).
func (se *seriesRow) judge(gated map[int64]bool, o changes.Options) []changes.Judged {
	n := len(se.measured)
	if n > 0 && (gated[se.points[se.measured[n-1]].run] || gated[se.busyRun]) {
		return changes.AtNewest(se.obs, o)
	}
	var out []changes.Judged
	for _, c := range changes.Detect(se.obs, o) {
		out = append(out, changes.Judged{Change: c})
	}
	return out
}

// checkBatch is how many series check holds points of at once: about 250,000 points'
// worth of a lookback's window (4,096 series of 60 runs; 256 of a 1,000-run backfill), so
// a check's memory is bounded whatever the window.
func checkBatch(lookback int) int { return max(256, 250_000/max(1, lookback)) }

// load makes the series' measured points into observations for the detector. A measured
// point whose value is not a finite positive number cannot have been written by opx: the
// store is refused, naming it.
func (se *seriesRow) load(ctxs map[int64]context_, byID map[int64]RunRef, where string) error {
	se.obs, se.measured, se.busyRun = se.obs[:0], se.measured[:0], 0
	for j, p := range se.points {
		if p.outcome != verdict.Measured {
			continue
		}
		if !p.value.Valid || !(p.value.Float64 > 0) || math.IsInf(p.value.Float64, 0) {
			v := "no value"
			if p.value.Valid {
				v = strconv.FormatFloat(p.value.Float64, 'g', -1, 64)
			}
			return fmt.Errorf("%s: series %s holds an impossible measured value at run %s (%s): the store was edited or damaged",
				where, safe.Text(se.key), safe.Text(byID[p.run].RunID), v)
		}
		if ctxs[p.ctx].Contended != "" {
			se.busyRun = p.run // the newest so far
			continue           // measured under contention: never the evidence of a change (atTest asks for it again)
		}
		x := changes.Obs{V: p.value.Float64, Node: ctxs[p.ctx].Node, Kind: ctxs[p.ctx].kind()}
		if p.lo.Valid && p.hi.Valid {
			x.Lo, x.Hi, x.Spread = p.lo.Float64, p.hi.Float64, true
		}
		se.obs = append(se.obs, x)
		se.measured = append(se.measured, j)
	}
	return nil
}

// summarize keeps what the page lists of every series: its latest value or outcome, its
// trend over the window, and how many runs it has there.
func (se *seriesRow) summarize() {
	se.npoints, se.latest, se.trend = len(se.points), "–", trend(se.obs)
	if n := len(se.points); n > 0 {
		last := se.points[n-1]
		if last.outcome == verdict.Measured && last.value.Valid {
			se.latest = results.Format(se.metric, last.value.Float64)
		} else {
			se.latest = last.outcome.String()
		}
	}
}

// changesOf are the series' changes as check reports them.
func (se *seriesRow) changesOf(found []changes.Judged, byID map[int64]RunRef, ctxs map[int64]context_, meta map[int64]runMeta, o CheckOptions) []finding {
	var out []finding
	plain := make([]changes.Change, len(found))
	for i, c := range found {
		plain[i] = c.Change
	}
	for i, c := range found {
		p := se.points[se.measured[c.At]]
		r := byID[p.run]
		from := 0
		for _, d := range found {
			if d.At < c.At && d.Node == c.Node {
				from = d.At
			}
		}
		before := changes.Level(se.obs, max(from, c.At-30), c.At)
		ch := Change{Key: se.key, Metric: se.metric, RunID: r.RunID, At: r.At.UTC().Format(time.RFC3339), Ratio: c.Ratio, P: c.P,
			Before: math.Exp(before), After: math.Exp(changes.Level(se.obs, c.At, min(len(se.obs), c.At+30))), Runs: c.After,
			at: r.At, cluster: se.cluster, run: p.run, Status: Confirmed, caseKey: se.key}
		if strings.HasPrefix(se.cluster, LocalRunner+"@") {
			ch.caseKey = results.CaseKey(se.testlist, se.op, se.args, se.backend, se.ws, LocalRunner)
		}
		if c.After < o.ConfirmAfter {
			ch.Status = Suspected
		}
		ch.Speedup = 1 / c.Ratio
		if !se.lower {
			ch.Speedup = c.Ratio
		}
		ch.Direction = compare.Faster
		if ch.Speedup < 1 {
			ch.Direction = compare.Slower
		}
		ch.Provenance, ch.MachinesChanged = provenance(se, c.At, ctxs, meta), c.Mix
		ch.Nodes = changes.Attribute(se.obs, plain, i, o.Options)
		if c.Node != "" {
			ch.Nodes = []string{c.Node}
			ch.Before = math.Exp(nodeLevel(se.obs, c.Node, c.At, -30))
			ch.After = math.Exp(nodeLevel(se.obs, c.Node, c.At, 30))
		}
		if ch.Nodes == nil {
			ch.Nodes = []string{}
		}
		ch.series, ch.cell = se.id, p.cell
		for _, q := range se.measured[c.At:] {
			ch.measuredOn = appendNew(ch.measuredOn, ctxs[se.points[q].ctx].Node)
		}
		ch.New, ch.Holds, ch.judged, ch.lower = c.New, c.Holds, c, se.lower
		if c.Now > 0 {
			ch.RatioNow, ch.SpeedupNow = c.Now, 1/c.Now
			if !se.lower {
				ch.SpeedupNow = c.Now
			}
		}
		ch.ID, ch.Triage = ChangeID(se.key, se.metric, r.RunID, r.origin), TriageOpen
		// the same change dated a run or two apart by an earlier check: its id, so its
		// triage carries over
		for _, d := range []int{-1, 1, -2, 2} {
			if j := c.At + d; j >= 0 && j < len(se.measured) {
				q := byID[se.points[se.measured[j]].run]
				ch.aliases = append(ch.aliases, ChangeID(se.key, se.metric, q.RunID, q.origin))
			}
		}
		ch.Testlist, ch.Op, ch.Backend, ch.Cluster = se.testlist, se.op, se.backend, se.cluster
		out = append(out, finding{se, ch})
	}
	return out
}

// worse orders changes worst first: slower before faster, then by size.
func worse(a, b Change) bool {
	if (a.Direction == compare.Slower) != (b.Direction == compare.Slower) {
		return a.Direction == compare.Slower
	}
	return math.Abs(math.Log(a.Speedup)) > math.Abs(math.Log(b.Speedup))
}

// provenanceFields are the fields a change is tied to, in the order they are said.
var provenanceFields = []string{"source_sha", "image_digest", "driver", "gpu", "nodes", "opx_version"}

// provenance is what differs between the three runs before the shift at obs index at and
// the three from it: for the source SHA the last before and first after (the commits in
// between are the suspects), for the others their sets of values.
func provenance(se *seriesRow, at int, ctxs map[int64]context_, meta map[int64]runMeta) map[string]Diff {
	get := func(j int, field string) string {
		p := se.points[se.measured[j]]
		c, m := ctxs[p.ctx], meta[p.run]
		switch field {
		case "source_sha":
			return m.sourceSHA
		case "image_digest":
			return c.ImageDigest
		case "driver":
			return c.Driver
		case "gpu":
			return c.GPU
		case "nodes":
			return c.Node
		}
		return m.opxVersion
	}
	set := func(a, b int, field string) string {
		seen := map[string]bool{}
		for j := max(0, a); j < min(b, len(se.measured)); j++ {
			if v := get(j, field); v != "" {
				seen[v] = true
			}
		}
		return strings.Join(slices.Sorted(maps.Keys(seen)), ", ")
	}
	out := map[string]Diff{}
	for _, field := range provenanceFields {
		var d Diff
		if field == "source_sha" {
			d = Diff{Before: get(at-1, field), After: get(at, field)}
		} else {
			d = Diff{Before: set(at-3, at, field), After: set(at, at+3, field)}
		}
		if d.Before != d.After {
			out[field] = d
		}
	}
	return out
}

// runs are the store's runs, newest first (confirmation runs are not in a series' time).
func (s *Store) runs(ctx context.Context) ([]RunRef, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, run_id, at, origin FROM runs WHERE confirms IS NULL ORDER BY at DESC, id DESC")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	var out []RunRef
	for rows.Next() {
		var r RunRef
		var at int64
		if err := rows.Scan(&r.id, &r.RunID, &at, &r.origin); err != nil {
			return nil, err
		}
		r.At = time.Unix(at, 0).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

type runMeta struct{ sourceSHA, opxVersion string }

func (s *Store) runMeta(ctx context.Context) (map[int64]runMeta, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, source_sha, opx_version FROM runs")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	out := map[int64]runMeta{}
	for rows.Next() {
		var id int64
		var m runMeta
		if err := rows.Scan(&id, &m.sourceSHA, &m.opxVersion); err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, rows.Err()
}

func (s *Store) contexts(ctx context.Context) (map[int64]context_, error) {
	contended, kind := "contended", "kind"
	if s.rev < 1 { // a store of before revision 1, read as it is: every context quiet
		contended = "''"
	}
	if s.rev < 3 { // before revision 3: no kind recorded (kind() derives one)
		kind = "''"
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, node, gpu, driver, image_digest, sm_clock, throttle, "+contended+", "+kind+" FROM contexts")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	out := map[int64]context_{}
	for rows.Next() {
		var id int64
		var c context_
		if err := rows.Scan(&id, &c.Node, &c.GPU, &c.Driver, &c.ImageDigest, &c.SMClock, &c.Throttle, &c.Contended, &c.Kind); err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, rows.Err()
}

// seriesToCheck are the series the newest run touched (or all), filtered.
func (s *Store) seriesToCheck(ctx context.Context, o CheckOptions, gated map[int64]bool) ([]*seriesRow, error) {
	query := "SELECT id, key, testlist, op, args, backend, world_size, cluster, metric, lower_is_better FROM series"
	var args []any
	if !o.All {
		ids := slices.Sorted(maps.Keys(gated))
		query += " WHERE id IN (SELECT series FROM points WHERE run IN (" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + "))"
		for _, id := range ids {
			args = append(args, id)
		}
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+" ORDER BY id"), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	var out []*seriesRow
	for rows.Next() {
		se := &seriesRow{}
		var lower int
		if err := rows.Scan(&se.id, &se.key, &se.testlist, &se.op, &se.args, &se.backend, &se.ws, &se.cluster, &se.metric, &lower); err != nil {
			return nil, err
		}
		se.lower = lower == 1
		if keeps(o.Filter, se) {
			out = append(out, se)
		}
	}
	return out, rows.Err()
}

// filterValues are the values each field the filter names has in the store (at most 20
// of each): what a filter that matched nothing could have said.
func (s *Store) filterValues(ctx context.Context, o CheckOptions) (map[string][]string, error) {
	out := map[string][]string{}
	for k := range o.Filter {
		if !slices.Contains(FilterFields, k) {
			continue
		}
		rows, err := s.db.QueryContext(ctx, "SELECT DISTINCT "+k+" FROM series ORDER BY "+k+" LIMIT 21")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Where, err)
		}
		vs := []string{}
		for rows.Next() {
			var v any
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, err
			}
			vs = append(vs, fmt.Sprint(v))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out[k] = vs
	}
	return out, nil
}

// FilterFields are the series fields --filter takes.
var FilterFields = []string{"testlist", "op", "args", "backend", "world_size", "cluster"}

func keeps(f map[string]string, se *seriesRow) bool {
	for k, v := range f {
		var have string
		switch k {
		case "testlist":
			have = se.testlist
		case "op":
			have = se.op
		case "args":
			have = se.args
		case "backend":
			have = se.backend
		case "world_size":
			have = strconv.Itoa(se.ws)
		case "cluster":
			have = se.cluster
		}
		if have != v {
			return false
		}
	}
	return true
}

// window reads each series' newest lookback points (oldest first): an index range per
// series, never its whole history.
func (s *Store) window(ctx context.Context, series []*seriesRow, lookback int) error {
	const cols = "at, run, outcome, value, lo, hi, ctx, cell"
	scan := func(rows *sql.Rows, into func(id int64) *seriesRow, withID bool) error {
		defer rows.Close()
		for rows.Next() {
			var p stored
			var id int64
			var outcome int
			dest := []any{&p.at, &p.run, &outcome, &p.value, &p.lo, &p.hi, &p.ctx, &p.cell}
			if withID {
				dest = append([]any{&id}, dest...)
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			p.outcome = verdict.Outcome(outcome)
			se := into(id)
			se.points = append(se.points, p)
		}
		return rows.Err()
	}
	if s.pg {
		byID := map[int64]*seriesRow{}
		for _, se := range series {
			byID[se.id] = se
		}
		for start := 0; start < len(series); start += 5000 {
			ids := make([]int64, 0, 5000)
			for _, se := range series[start:min(len(series), start+5000)] {
				ids = append(ids, se.id)
			}
			rows, err := s.db.QueryContext(ctx, `SELECT s.id, `+cols+` FROM unnest($1::bigint[]) AS s(id)
				CROSS JOIN LATERAL (SELECT `+cols+` FROM points WHERE series = s.id ORDER BY at DESC, run DESC LIMIT $2) p`, ids, lookback)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Where, err)
			}
			if err := scan(rows, func(id int64) *seriesRow { return byID[id] }, true); err != nil {
				return err
			}
		}
	} else {
		stmt, err := s.db.PrepareContext(ctx, "SELECT "+cols+" FROM points WHERE series = ? ORDER BY at DESC, run DESC LIMIT ?")
		if err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
		defer stmt.Close()
		for _, se := range series {
			rows, err := stmt.QueryContext(ctx, se.id, lookback)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Where, err)
			}
			if err := scan(rows, func(int64) *seriesRow { return se }, false); err != nil {
				return err
			}
		}
	}
	for _, se := range series {
		slices.Reverse(se.points)
	}
	return nil
}

// nodeLevel is the log median of up to n of the node's points from at (n > 0) or before it
// (n < 0).
func nodeLevel(obs []changes.Obs, node string, at, n int) float64 {
	var v []changes.Obs
	if n > 0 {
		for i := at; i < len(obs) && len(v) < n; i++ {
			if obs[i].Node == node {
				v = append(v, obs[i])
			}
		}
	} else {
		for i := at - 1; i >= 0 && len(v) < -n; i-- {
			if obs[i].Node == node {
				v = append(v, obs[i])
			}
		}
	}
	return changes.Level(v, 0, len(v))
}
