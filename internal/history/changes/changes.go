// Package changes finds where a series' level shifted and how sure it is: calibrated tests, each
// series judged on its own at a fixed false-alarm level.
//
// It finds where a series' level shifted, and says how sure it is. Each
// series is judged on its own, at a fixed level (Options.Alpha): the chance that a series
// whose level never moved is called changed. Nothing in a series' answer depends on which
// other series a store holds or a filter selects. It works on the logarithm of the metric
// (noise is a proportion of the level), so a ratio is a difference.
//
// Two tests, each calibrated by simulation (calibrate.go, table.go):
//   - the newest runs (1, 2, 3 or 5 of them) against the level before them: its median
//     and robust spread, since the last shift binary segmentation finds before them;
//   - a rank test over every split (binary segmentation, each split judged on its own
//     evidence at the same level) for the shifts before.
//
// docs/history.md gives the method and its measured error rates.
package changes

import (
	"math"
	"slices"
	"sort"
)

// Obs is one run's point of a series, oldest first.
type Obs struct {
	V      float64 // the metric (> 0)
	Lo, Hi float64 // its recorded spread, when Spread
	Spread bool
	Node   string
	// Kind is what the node is, as its context recorded it (GPU model and clocks, or CPU
	// model): the level of a node with few points in the series is its kind's (kinds.go).
	Kind string
}

// Options are the detector's thresholds.
type Options struct {
	MinChange float64 // the smallest shift called, as a fraction (0.02: 2%)
	// Alpha bounds, per series, the chance that a series whose level never moved is
	// called changed: half of it is the newest runs' test's, a quarter the rank test's,
	// a quarter its nodes' own rank tests'.
	Alpha float64
	// ConfirmAfter is how many runs of the new level make a change confirmed; fewer is
	// suspected (a shift at the newest runs).
	ConfirmAfter int
	// inflation is how much more the series' noise varies over many runs than over one
	// (drift.go): 1, or 0, for runs that are independent.
	inflation float64
}

// Defaults are the thresholds docs/history.md measured.
var Defaults = Options{MinChange: 0.02, Alpha: 0.01, ConfirmAfter: 3}

// Change is one shift found in a series.
type Change struct {
	At    int     // index of the first point of the new level
	Ratio float64 // new level / old level (medians), of the metric
	P     float64 // the test's calibrated p-value
	After int     // points of the new level
	// Tail is whether it was found by the newest runs' test.
	Tail bool
	// Node is set when the shift shows in that node's points only (the series pooled
	// over its nodes shows none near it).
	Node string
	// Level is the new level (the log of its runs' median) and Noise the robust spread of
	// the old one (log units): what tells whether two checks found the same change.
	Level, Noise float64
	// Mix is set when the machines changed with the level: the old level's runs and the
	// new one's were all on recorded kinds of machine, none of them on both sides ("MI300X
	// at 2100 MHz → MI300X at 1900 MHz"). What it is depends on what the series knows of
	// the new kinds (markMixes): Explained, NewKind, or neither — the new kinds' earlier
	// runs put them elsewhere, so the code moved too: it gates as any other change.
	Mix string
	// Explained is whether the new kinds' own earlier runs put them where the new level is:
	// a change of machine, not of the code, and it never fails a gate.
	Explained bool
	// NewKind is whether some new kind never ran earlier in the series: its level there is
	// its first, and whether the machine or the code moved cannot be told from the series
	// (a run on the old kind tells). Like a series too young to judge, it never fails a
	// gate; it is said with the change.
	NewKind bool
	// Rebased is whether Ratio is measured from the new kind's own earlier level, not from
	// the level just before the change: a series that ran on a kind alone, moved onto a
	// kind it cannot judge (NewKind), and came back off the first kind's level — the code
	// moved, by as much as the first kind's runs say.
	Rebased bool
}

// Judged is a change as the gate sees it at a series' newest run.
type Judged struct {
	Change
	// New is whether the same check as of the run before did not report it (Same).
	New bool
	// Holds is whether the newest run lies nearer the new level than the old one.
	Holds bool
	// Now is the change's size now: the series' newest level (the median of its newest
	// runs, none before the latest change) over the change's old level. A change first
	// found small that keeps growing (a drift) is judged at this size, not its first.
	Now float64
}

// AtNewest is the series' changes (Detect) as the gate judges them at its newest point:
// each new or not, holding there or not, and its size now. It is what opx history check's
// gate decides on (Fails), and what scripts/history-bench measures.
func AtNewest(s []Obs, o Options) []Judged {
	raw := s
	s = onOneLevel(Labelled(s, o), o)
	ys := logsOf(s)
	cur := drifting(s, ys, o)
	if len(cur) == 0 {
		return nil
	}
	// the check as of the run before, exactly as it was made then: its kinds' levels and its
	// noise's drift measured without the newest run
	prev := Detect(raw[:len(raw)-1], o)
	n := len(s)
	y := math.Log(s[n-1].V)
	last := 0 // the first run of the newest level: no level before it is "now"
	for _, c := range cur {
		if c.Node == "" {
			last = max(last, c.At)
		}
	}
	out := make([]Judged, len(cur))
	for i, c := range cur {
		old := c.Level - math.Log(c.Ratio)
		now := Level(s, max(last, n-3), n)
		if c.Node != "" {
			now = nodeNow(s, c.Node, max(last, c.At))
		}
		out[i] = Judged{Change: c, New: !slices.ContainsFunc(prev, func(d Change) bool { return Same(c, d) }),
			Holds: math.Abs(y-c.Level) < math.Abs(y-old), Now: math.Exp(now - old)}
	}
	return out
}

// nodeNow is the log median of the node's newest 3 points from index from on.
func nodeNow(s []Obs, node string, from int) float64 {
	var v []Obs
	for i := len(s) - 1; i >= from && len(v) < 3; i-- {
		if s[i].Node == node {
			v = append(v, s[i])
		}
	}
	return Level(v, 0, len(v))
}

// Slower is by how much a ratio (new over old, of the metric) is slower, as a fraction:
// 0.1 is 10% slower; a faster ratio is negative.
func Slower(ratio float64, lowerIsBetter bool) float64 {
	if !lowerIsBetter {
		ratio = 1 / ratio
	}
	return ratio - 1
}

// Fails is the gate's rule for one change, the one every gate of opx calls (opx history
// check, opx serve, scripts/history-bench): it fails a gate of pct percent while it holds
// at the series' newest run and is slower by at least pct now (Now) — every night it
// stands, not only the first; with newOnly, only on the night it is new (at its size
// then). Triage (expected, invalid) is the caller's: it releases a change.
func (j Judged) Fails(pct float64, lowerIsBetter, newOnly bool) bool {
	if !j.Holds || j.Explained || j.NewKind {
		return false // a change of machine, or onto a kind the series cannot judge yet
	}
	if newOnly {
		return j.New && Slower(j.Ratio, lowerIsBetter) >= pct/100
	}
	return Slower(j.Now, lowerIsBetter) >= pct/100
}

// Same is whether c and d (found by two checks of one series, one run apart) are the same
// change: the same direction and node, first runs within 5, and new levels within six
// times the lesser of their noises or a tenth of the shift (a lone outlier first taken for
// a new level is not the level that followed it). Within 5, not 2: a step whose first runs
// are noisy is dated again a few runs later as its runs come in, and is the change already
// said, not a new one (--new-only would say it twice; after an outlier, 2-3 of about 4,300
// nights did). The lesser noise: a second step a few runs after a first is measured
// against the first's few runs, whose spread spans the step; by the greater, a 20% step
// 4 runs after a 10% one at 1% noise was the same change 27 times in 100.
func Same(c, d Change) bool {
	tol := math.Max(6*math.Min(c.Noise, d.Noise), math.Abs(math.Log(c.Ratio))/10)
	return (c.Ratio > 1) == (d.Ratio > 1) && c.Node == d.Node && abs(c.At-d.At) <= 5 && math.Abs(c.Level-d.Level) <= tol
}

// MinRef is the fewest runs of a level the newest runs are judged against: a series with
// fewer than MinRef+1 measured runs cannot be judged yet (Young).
const MinRef = 4

// minPoints is the fewest points the rank test splits.
const minPoints = 6

// Tails are how many newest runs the newest runs' test takes together.
var Tails = []int{1, 2, 3, 5}

// Young is whether a series of n measured runs is too short to judge, and how many it
// needs.
func Young(n int) (bool, int) { return n < MinRef+1, MinRef + 1 }

// Detect is the series' changes, oldest first.
func Detect(s []Obs, o Options) []Change {
	s = onOneLevel(Labelled(s, o), o)
	return drifting(s, logsOf(s), o)
}

// prefixes keeps the rank test's changes of a series' first m points (segment over
// [0, m)), by m: one check asks for the same prefixes many times (each newest-runs tail,
// the run before's check).
type prefixes map[int]*prefix

type prefix struct {
	seg             []Change
	segDone, tailed bool
	tail            Change
	tailOK          bool
}

func (p prefixes) at(m int) *prefix {
	if p[m] == nil {
		p[m] = &prefix{}
	}
	return p[m]
}

func (p prefixes) segment(s []Obs, y []float64, m int, o Options) []Change {
	q := p.at(m)
	if !q.segDone {
		q.seg, q.segDone = segment(s, y, 0, m, o.Alpha/4, o), true
	}
	return q.seg
}

// newest is the newest runs' test of the first m points, without looking for a step
// before their own tails (newest's inner call), kept by m.
func (p prefixes) newest(s []Obs, y []float64, m int, o Options) (Change, bool) {
	q := p.at(m)
	if !q.tailed {
		q.tail, q.tailOK = newest(s[:m], y[:m], o, p, false)
		q.tailed = true
	}
	return q.tail, q.tailOK
}

func detect(s []Obs, y []float64, o Options, pre prefixes) []Change {
	n := len(s)
	if young, _ := Young(n); young {
		return nil
	}
	var out []Change
	end := n
	if ch, ok := newest(s, y, o, pre, true); ok {
		out, end = append(out, ch), ch.At
		// a step found by the newest runs' test just before this one, too young for the
		// rank test to split: a change of its own, kept
		if prev, ok := pre.newest(s, y, end, o); ok && end-prev.At >= MinRef {
			seg := pre.segment(s, y, end, o)
			if !slices.ContainsFunc(seg, func(d Change) bool { return abs(d.At-prev.At) <= 2 }) {
				prev.Level = median(y[prev.At:end])
				out, end = append([]Change{prev}, out...), prev.At
			}
		}
	}
	out = append(slices.Clone(pre.segment(s, y, end, o)), out...)
	// a shift in one node's points, where the series pooled over its nodes shows none
	// near it: that node's alone
	var tested []string
	for _, nd := range nodesOf(s) {
		if idx, _ := nodePoints(s, y, nd); len(idx) >= 2*minPoints {
			tested = append(tested, nd)
		}
	}
	pooled := slices.Clone(out)
	for _, nd := range tested {
		idx, ny := nodePoints(s, y, nd)
		sub := make([]Obs, len(idx))
		for j, i := range idx {
			sub[j] = s[i]
		}
		alpha := o.Alpha / 4 / float64(len(tested))
		// its own noise when it has the runs to tell (the pooled series' drift may be its
		// nodes' mix, not any node's), else the pooled series'
		on := o
		if len(ny) >= minDriftRuns {
			on.inflation = 0
		}
		found := segment(sub, ny, 0, len(ny), alpha, on)
		if len(ny) >= minDriftRuns {
			if f := inflationOf(ny, found); f > 1 {
				on.inflation = f
				found = segment(sub, ny, 0, len(ny), alpha, on)
			}
		}
		for _, ch := range found {
			// the pooled series' change seen in this node's points (where a node's own
			// split falls is a few of its points off the pooled one's): not the node's alone
			seen := slices.ContainsFunc(pooled, func(d Change) bool {
				jd, _ := slices.BinarySearch(idx, d.At)
				return (d.Ratio > 1) == (ch.Ratio > 1) && abs(jd-ch.At) <= 3
			})
			if !seen {
				ch.At, ch.Node = idx[ch.At], nd
				out = append(out, ch)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	for i := range out {
		out[i].After = n - out[i].At
	}
	markMixes(s, out, o)
	return out
}

func logsOf(s []Obs) []float64 {
	y := make([]float64, len(s))
	for j, x := range s {
		y[j] = math.Log(x.V)
	}
	return y
}
