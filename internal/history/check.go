// Judging (opx history check): each series read in bounded batches, judged at its newest
// judged run (changes.AtNewest), and its changes made into what check reports (found.go).

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

// finding is a change found in a series, before confirmation runs settle it.
type finding struct {
	se *seriesRow
	ch Change
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
	ctxs, meta, err := s.provenanceOf(ctx)
	if err != nil {
		return nil, err
	}
	f.Series, f.series, f.byID = len(series), series, byID
	// a batch of series at a time: each is judged on its own, and its points are let go
	// unless it changed (the page draws it), so a check of any size holds two batches (the
	// one judged, the next being read)
	var findings []finding
	next, stop := s.windows(ctx, series, o.Lookback)
	defer stop()
	for w := range next {
		if w.err != nil {
			return nil, w.err
		}
		part := w.part
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
	if err := ctx.Err(); err != nil {
		return nil, err // the reading stopped early: never a check of part of the series
	}
	kept, err := s.settle(ctx, f, findings, ctxs, o.Options)
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
				// on its kind's level (a pool's kinds measure at levels of their own)
				v := se.points[n-1].value.Float64 / changes.KindRatio(se.obs, ctxs[se.points[n-1].ctx].kind(), o)
				level := math.Exp(changes.Level(changes.Levelled(se.obs, o), max(0, k-3), k))
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
		labelled := changes.Labelled(se.obs, o) // the kinds recorded, or the levels none explains
		newest, kinds := labelled[k-1].Kind, changes.Kinds(se.obs, o)
		for _, kd := range kinds {
			if kd.Key == newest && kd.Ratio != 1 {
				recent := 0
				for _, x := range labelled[max(0, k-10):] {
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

// checkBatch is how many series a batch of check's holds points of: about 250,000 points'
// worth of a lookback's window (4,096 series of 60 runs; 256 of a 1,000-run backfill); a
// check holds two batches at once (windows), so its memory is bounded whatever the window.
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
	lv := changes.Levelled(se.obs, o.Options) // the levels a change is between: each kind on one level
	for i, c := range found {
		p := se.points[se.measured[c.At]]
		r := byID[p.run]
		from := 0
		for _, d := range found {
			if d.At < c.At && d.Node == c.Node {
				from = d.At
			}
		}
		before := changes.Level(lv, max(from, c.At-30), c.At)
		if c.Rebased { // measured from the kind's own level before it moved away
			before = c.Level - math.Log(c.Ratio)
		}
		ch := Change{Key: se.key, Metric: se.metric, RunID: r.RunID, At: r.At.UTC().Format(time.RFC3339), Ratio: c.Ratio, P: c.P,
			Before: math.Exp(before), After: math.Exp(changes.Level(lv, c.At, min(len(se.obs), c.At+30))), Runs: c.After,
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
		ch.Provenance, ch.MachinesChanged, ch.Machines = provenance(se, c.At, ctxs, meta), c.Mix, machinesOf(c.Change)
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
			ch.kindsOn = appendNew(ch.kindsOn, ctxs[se.points[q].ctx].kind())
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
