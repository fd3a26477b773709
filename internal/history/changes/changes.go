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
	"cmp"
	"container/heap"
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
	// at 2100 MHz → MI300X at 1900 MHz"). It is reported as a change of machine, never a
	// change of the code's speed, and never fails a gate.
	Mix string
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
	s = onOneLevel(s, o)
	ys := logsOf(s)
	cur, how := drifting(s, ys, o)
	if len(cur) == 0 {
		return nil
	}
	prev := how.again(s, ys, len(s)-1)
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
	if !j.Holds || j.Mix != "" {
		return false
	}
	if newOnly {
		return j.New && Slower(j.Ratio, lowerIsBetter) >= pct/100
	}
	return Slower(j.Now, lowerIsBetter) >= pct/100
}

// Same is whether c and d (found by two checks of one series, one run apart) are the same
// change: the same direction and node, first runs within 2, and new levels within six
// times the noise or a tenth of the shift (a lone outlier first taken for a new level is
// not the level that followed it).
func Same(c, d Change) bool {
	tol := math.Max(6*math.Max(c.Noise, d.Noise), math.Abs(math.Log(c.Ratio))/10)
	return (c.Ratio > 1) == (d.Ratio > 1) && c.Node == d.Node && abs(c.At-d.At) <= 2 && math.Abs(c.Level-d.Level) <= tol
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
	s = onOneLevel(s, o)
	found, _ := drifting(s, logsOf(s), o)
	return found
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
	markMixes(s, out)
	return out
}

func logsOf(s []Obs) []float64 {
	y := make([]float64, len(s))
	for j, x := range s {
		y[j] = math.Log(x.V)
	}
	return y
}

// newest is a shift at the newest runs: the newest k (5, 3, 2, then 1) against the level
// before them — the runs since the last shift binary segmentation finds among the runs
// before them, less those just before the newest k that already lie nearer their level
// (tailTest) — when their calibrated p-value clears Alpha/2 over the k tried, they agree
// on a new level (each on its side, at least half as far from the old level as their
// centre, and within 5 times the noise or a tenth of the shift of it: an outlier and the
// level after it are not one level) and it is large enough. The longest such tail is
// taken (more runs at a new level say more), dated at its first run: the runs just before
// the newest k that lie nearer the new level join it.
func newest(s []Obs, y []float64, o Options, pre prefixes, outer bool) (Change, bool) {
	n := len(y)
	alpha := o.Alpha / 2 / float64(len(Tails))
	for i := len(Tails) - 1; i >= 0; i-- {
		k := Tails[i]
		if n-k < MinRef {
			continue
		}
		from := 0
		if seg := pre.segment(s, y, n-k, o); len(seg) > 0 {
			from = seg[len(seg)-1].At
		}
		// a step the newest runs' test found before these runs (too young for the rank
		// test to split): its level is the reference, not the levels on both sides of it
		// (a later, larger step after one is a change of its own)
		if outer {
			if ch, ok := pre.newest(s, y, n-k, o); ok && n-k-ch.At >= MinRef {
				from = max(from, ch.At)
			}
		}
		if n-k-from < MinRef {
			continue
		}
		tl := y[n-k:]
		z, joined, med, sd := tailTest(y[from:n-k], tl)
		p := tailP(z/math.Sqrt(min(o.inflated(), float64(k))), n-k-from, k) // k drifting runs tell no more than fewer independent ones
		if p > alpha {
			continue
		}
		c := center(tl)
		tol := math.Max(5*sd, math.Abs(c-med)/10)
		agree := true
		for _, v := range tl {
			agree = agree && (v > med) == (c > med) && math.Abs(v-med) >= math.Abs(c-med)/2 && math.Abs(v-c) <= tol
		}
		if !agree {
			continue
		}
		at := n - k - joined
		for at-1 > from && math.Abs(y[at-1]-c) < math.Abs(y[at-1]-med) && math.Abs(y[at-1]-c) <= tol {
			at-- // dated at its first run: the reference's last runs that lie at the new level
		}
		if ofItsKind(s[:n-k], y[:n-k], s[n-k:], med, c, o) {
			continue // the newest runs are on a machine whose level this is: a change of the mix
		}
		if r, ok := shift(s, y, from, at, n, o); ok {
			return Change{At: at, Ratio: r, P: p * float64(len(Tails)), Tail: true, Level: levelOf(y[at:n]), Noise: sd}, true
		}
	}
	return Change{}, false
}

// tailTest is the newest runs' statistic against the runs before them (pre): the runs
// at the end of pre that lie nearer the newest runs' centre than pre's median (and within
// 5 of pre's spreads of it) are taken to be the new level's first runs (joined), and —
// for two or more newest runs — the rest are the reference whose median and robust
// spread the statistic is measured in (a step a few runs old is then not measured
// against its own first runs). One newest run is measured against all of pre: there the
// choice would cost power on a step's first night and gain nothing. The simulation that
// calibrates it (SimulateTail) makes the same choice.
func tailTest(pre, tl []float64) (z float64, joined int, med, sd float64) {
	c := center(tl)
	med, sd = median(pre), robustSD(pre)
	if q := coarse(pre, tl); q > 0 { // values that tie: a level between two quanta is their mean, not either quantum
		return coarseTail(pre, tl, q)
	}
	if len(tl) == 1 {
		z = tailStat(tl, med, sd)
	}
	for joined < len(pre)-MinRef {
		v := pre[len(pre)-1-joined]
		if math.Abs(v-c) >= math.Abs(v-med) || math.Abs(v-c) > 5*sd {
			break
		}
		joined++
	}
	if len(tl) == 1 {
		return z, joined, med, sd
	}
	if joined > 0 {
		ref := pre[:len(pre)-joined]
		med, sd = median(ref), robustSD(ref)
	}
	return tailStat(tl, med, sd), joined, med, sd
}

// coarse is the resolution (resolution) of a reference and the newest runs together, 0
// unless their values tie (recorded at a coarse resolution), so that a median is a quantum,
// not a level. The newest runs count: a reference that is one value throughout (16, 16, …)
// shows no step between quanta until the first value off it (18).
func coarse(pre, tl []float64) float64 {
	s := append(slices.Clone(pre), tl...)
	slices.Sort(s)
	return resolution(s)
}

// coarseTail is tailTest for values that tie, of resolution q: levels are means (rounding
// to a quantum dithers a level that lies between two; their mean finds it, a median snaps
// to one), the newest runs' centre their mean, its standard error the spread (never below
// half a quantum) over √k.
func coarseTail(pre, tl []float64, q float64) (z float64, joined int, med, sd float64) {
	med, sd = mean(pre), math.Max(robustSD(pre), q)
	c := mean(tl)
	return math.Abs(c-med) / (sd / math.Sqrt(float64(len(tl)))), 0, med, sd
}

// tailStat is how far the newest runs' centre lies from the reference's median, in
// standard errors of that centre (the robust spread over √k; a median's is 1.2533 times
// a mean's).
func tailStat(tl []float64, med, sd float64) float64 {
	se := sd / math.Sqrt(float64(len(tl)))
	if len(tl) > 2 {
		se *= 1.2533
	}
	return math.Abs(center(tl)-med) / se
}

// center is the newest points' level: their mean when one or two, else their median.
func center(v []float64) float64 {
	if len(v) <= 2 {
		return mean(v)
	}
	return median(v)
}

// segment is binary segmentation of y[a:b]: the best split, kept when its calibrated
// p-value clears alpha, then each side again, each split judged on its own evidence at
// the same level. Each split's shift is then measured between its neighbours (the levels
// on either side, up to the next split each way, not the rest of the series: a level
// that went and came back is two shifts), and the splits whose shift is too small are
// dropped, the smallest first, the others measured again without them.
func segment(s []Obs, y []float64, a, b int, alpha float64, o Options) []Change {
	var cut []Change
	var walk func(a, b int)
	walk = func(a, b int) {
		if b-a < minPoints {
			return
		}
		split, s0, e0, stat := levelOfRanks(ranks(y[a:b]))
		p := levelP(stat/math.Sqrt(o.inflated()), b-a)
		if p > alpha {
			return
		}
		if e0-s0 >= 4 { // placed within the interval where the evidence is (only when significant: it is the costly part)
			split = s0 + locate(y[a+s0:a+e0])
		}
		at := a + split
		if at <= a || at >= b {
			return // no split inside (a statistic of equal values)
		}
		cut = append(cut, Change{At: at, P: p})
		walk(a, at)
		walk(at, b)
	}
	walk(a, b)
	sort.SliceStable(cut, func(i, j int) bool { return cut[i].At < cut[j].At })
	for {
		worst, small := -1, math.Inf(1)
		for i := range cut {
			from, to := a, b
			if i > 0 {
				from = cut[i-1].At
			}
			if i+1 < len(cut) {
				to = cut[i+1].At
			}
			r, ok := shift(s, y, from, cut[i].At, to, o)
			cut[i].Ratio, cut[i].Level, cut[i].Noise = r, median(y[cut[i].At:to]), robustSD(y[from:cut[i].At])
			if !ok && math.Abs(math.Log(r)) < small {
				worst, small = i, math.Abs(math.Log(r))
			}
		}
		if worst < 0 {
			return cut
		}
		cut = slices.Delete(cut, worst, worst+1)
	}
}

// shift is the ratio of the levels of y[at:b] and y[a:at] (their medians), when it is at
// least MinChange and the new level is outside the old runs' typical recorded spread.
func shift(s []Obs, y []float64, a, at, b int, o Options) (float64, bool) {
	before, after := median(y[a:at]), median(y[at:b])
	if coarse(y[a:at], y[at:b]) > 0 { // values that tie: levels between quanta are means
		before, after = mean(y[a:at]), mean(y[at:b])
	}
	r := math.Exp(after - before)
	if math.Abs(r-1) < o.MinChange {
		return r, false
	}
	var lo, hi []float64
	for _, x := range s[a:at] {
		if x.Spread && x.Lo > 0 && x.Hi >= x.Lo {
			lo, hi = append(lo, math.Log(x.Lo)), append(hi, math.Log(x.Hi))
		}
	}
	if len(lo) > (at-a)/2 && after >= median(lo) && after <= median(hi) {
		return r, false // within what one run of the old level already spanned
	}
	return r, true
}

// levelOfRanks is the level statistic of a series' ranks: the largest standardized
// Mann–Whitney statistic of any split t of any interval [s, e) whose ends lie on a grid
// of about a tenth of the series (the whole series among them), both sides of at least
// two points. Taking intervals finds a level that went and came back (up, then down
// again), which a split of the whole series alone barely sees; ranks make it blind to how
// far an outlier lies. Each interval's statistic is standardized by its own ranks'
// spread, so its null distribution depends only on the series' length: calibrate.go
// simulates it.
func levelOfRanks(r []float64) (at, s, e int, z float64) {
	m := len(r)
	p, q := make([]float64, m+1), make([]float64, m+1)
	for i, v := range r {
		p[i+1], q[i+1] = p[i]+v, q[i]+v*v
	}
	g := max(1, (m+5)/10)
	var grid []int
	for x := 0; x < m; x += g {
		grid = append(grid, x)
	}
	if m-grid[len(grid)-1] < 2 && len(grid) > 1 {
		grid = grid[:len(grid)-1]
	}
	grid = append(grid, m)
	for i, a := range grid {
		for _, b := range grid[i+1:] {
			l := float64(b - a)
			if b-a < 4 {
				continue
			}
			mu := (p[b] - p[a]) / l
			v := ((q[b] - q[a]) - l*mu*mu) / (l - 1)
			if v <= 0 {
				continue
			}
			scale := l / v
			for t := a + 2; t <= b-2; t++ { // z², the square root once at the end
				left := float64(t - a)
				u := (p[t] - p[a]) - left*mu
				if zt := u * u * scale / (left * (l - left)); zt > z {
					at, s, e, z = t, a, b, zt
				}
			}
		}
	}
	return at, s, e, math.Sqrt(z)
}

// locate is where a level shift in y most likely is, once the rank test says there is
// one: the split with the least total absolute deviation of each side from its median
// (the rank statistic's peak wanders by several runs; this does not, and an outlier
// weighs only its distance). Both sides hold at least two points.
func locate(y []float64) int {
	n := len(y)
	left := prefixDeviations(y)
	rev := slices.Clone(y)
	slices.Reverse(rev)
	right := prefixDeviations(rev) // right[k]: the deviation of the last k
	best, at := math.Inf(1), 0
	for t := 2; t <= n-2; t++ { // the earliest of the best splits (sums equal but for rounding are equal)
		if c := left[t] + right[n-t]; at == 0 || c < best-1e-9*math.Max(1, math.Abs(best)) {
			best, at = c, t
		}
	}
	return at
}

// prefixDeviations are deviation(y[:t]) for every t (0..len(y)), in O(n log n): a running
// median kept by two heaps, with their sums (the deviation about a median is the upper
// half's sum less the lower half's, less the median times the difference of their sizes —
// the same for any median between the two middle values of an even count).
func prefixDeviations(y []float64) []float64 {
	out := make([]float64, len(y)+1)
	var lo, hi floatHeap // lo: the lower half, its largest first (stored negated); hi: the upper half
	var sumLo, sumHi float64
	for i, x := range y {
		if lo.Len() == 0 || x <= -lo.top() {
			heap.Push(&lo, -x)
			sumLo += x
		} else {
			heap.Push(&hi, x)
			sumHi += x
		}
		if lo.Len() > hi.Len()+1 { // keep len(lo) == len(hi) or one more
			v := -heap.Pop(&lo).(float64)
			sumLo -= v
			heap.Push(&hi, v)
			sumHi += v
		} else if hi.Len() > lo.Len() {
			v := heap.Pop(&hi).(float64)
			sumHi -= v
			heap.Push(&lo, -v)
			sumLo += v
		}
		m := -lo.top()
		out[i+1] = (sumHi - float64(hi.Len())*m) + (float64(lo.Len())*m - sumLo)
	}
	return out
}

// floatHeap is a min-heap of float64 (container/heap's).
type floatHeap []float64

func (h floatHeap) Len() int           { return len(h) }
func (h floatHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h floatHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floatHeap) Push(v any)        { *h = append(*h, v.(float64)) }
func (h *floatHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
func (h floatHeap) top() float64 { return h[0] }

// ranks are y's ranks, 1-based, ties given their average.
func ranks(y []float64) []float64 {
	type iv struct {
		v float64
		i int
	}
	idx := make([]iv, len(y))
	for i, v := range y {
		idx[i] = iv{v, i}
	}
	slices.SortFunc(idx, func(a, b iv) int {
		if c := cmp.Compare(a.v, b.v); c != 0 {
			return c
		}
		return a.i - b.i
	})
	r := make([]float64, len(y))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1].v == idx[i].v {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k].i] = avg
		}
		i = j + 1
	}
	return r
}

// nodesOf are the nodes a series was measured on, when more than one.
func nodesOf(s []Obs) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if x.Node != "" && !seen[x.Node] {
			seen[x.Node] = true
			out = append(out, x.Node)
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// nodePoints are the indexes and log values of the node's points.
func nodePoints(s []Obs, y []float64, node string) ([]int, []float64) {
	var idx []int
	var out []float64
	for i, x := range s {
		if x.Node == node {
			idx, out = append(idx, i), append(out, y[i])
		}
	}
	return idx, out
}

// MinNodeRuns is the fewest runs of the new level a node needs for its part in a change
// to be judged.
const MinNodeRuns = 3

// Attribute names the nodes the change found[i] (of a series' changes, oldest first) is
// confined to, at o.Alpha, on evidence only, between the changes before and after it: each point after the change is set against its own node's level
// before it (the pooled level for a node with fewer than 5 points before: a level of a
// few points is itself too noisy to judge a node by), and each
// node's residuals with at least MinNodeRuns points after are compared with the rest's
// (Mann–Whitney), Holm-corrected at o.Alpha over the nodes (a Kruskal–Wallis omnibus first
// was tried: one slow node among six is too small a part of it to clear). The nodes named
// differ from the rest and show the change (at least half of it, on its side) while the
// rest do not. nil when no node differs, fewer than two nodes can be judged, or every
// node shows it.
func Attribute(s []Obs, found []Change, i int, o Options) []string {
	alpha := o.Alpha
	s = onOneLevel(s, o) // each kind of machine on its own level, as the change was found
	at, ratio := found[i].At, found[i].Ratio
	from, to := max(0, at-30), len(s) // the level before it and the one after: up to the next change each way
	for _, d := range found {
		if d.Node == "" && d.At < at {
			from = max(from, d.At)
		}
		if d.Node == "" && d.At > at {
			to = min(to, d.At)
		}
	}
	nodes := nodesOf(s[at:to])
	if nodes == nil {
		return nil
	}
	y := logsOf(s)
	pooled := median(y[from:at])
	res := map[string][]float64{}
	for _, nd := range nodes {
		var before []float64
		for j := at - 1; j >= from; j-- {
			if s[j].Node == nd {
				before = append(before, y[j])
			}
		}
		lvl := pooled
		if len(before) >= MinNodeRuns+2 {
			lvl = median(before)
		}
		for j := at; j < to; j++ {
			if s[j].Node == nd {
				res[nd] = append(res[nd], y[j]-lvl)
			}
		}
	}
	var judged []string
	for _, nd := range nodes {
		if len(res[nd]) >= MinNodeRuns {
			judged = append(judged, nd)
		}
	}
	if len(judged) < 2 {
		return nil
	}
	step := math.Log(ratio)
	shows := func(v []float64) bool { m := median(v); return m*step > 0 && math.Abs(m) >= math.Abs(step)/2 }
	type nodeP struct {
		node string
		p    float64
	}
	var ps []nodeP
	for _, nd := range judged {
		var rest []float64
		for _, other := range judged {
			if other != nd {
				rest = append(rest, res[other]...)
			}
		}
		ps = append(ps, nodeP{nd, mannWhitney(res[nd], rest)})
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].p < ps[j].p })
	var named []string
	for i, x := range ps { // Holm's step-down
		if x.p > alpha/float64(len(ps)-i) {
			break
		}
		if shows(res[x.node]) {
			named = append(named, x.node)
		}
	}
	if len(named) == 0 || len(named) == len(judged) {
		return nil
	}
	var rest []float64
	for _, nd := range judged {
		if !slices.Contains(named, nd) {
			rest = append(rest, res[nd]...)
		}
	}
	if shows(rest) {
		return nil // the others show it too: not confined
	}
	slices.Sort(named)
	return named
}

// mannWhitney is the two-sided p-value (normal approximation) that a and b come from one
// distribution.
func mannWhitney(a, b []float64) float64 {
	r := ranks(append(slices.Clone(a), b...))
	na, nb := float64(len(a)), float64(len(b))
	sum := 0.0
	for i := range a {
		sum += r[i]
	}
	u := sum - na*(na+1)/2
	z := (u - na*nb/2) / math.Sqrt(na*nb*(na+nb+1)/12)
	return math.Erfc(math.Abs(z) / math.Sqrt2)
}

// Level is the log of the median of s[a:b] (of their mean when the values tie: a level
// between two quanta of a coarse resolution).
func Level(s []Obs, a, b int) float64 {
	v := make([]float64, 0, b-a)
	for _, x := range s[a:b] {
		v = append(v, math.Log(x.V))
	}
	return levelOf(v)
}

// levelOf is the level of logs y: their median, or their mean when they tie (coarse).
func levelOf(y []float64) float64 {
	if coarse(y, nil) > 0 {
		return mean(y)
	}
	return median(y)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func mean(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

// robustSD is the spread of v's noise: the standard deviation of its points once the
// outliers are set aside — one at a time, the point farthest from the others' median
// while it lies beyond 5 of the others' standard deviations (more for few: outlierSDs), at most a quarter of the
// points (at least one). One outlier, or the first run of a new level, weighs nothing in
// it: never the single largest deviation. (Trimming by the median absolute deviation was
// tried: a handful of points' MAD is itself so noisy that it throws good points away,
// and the test then needs a far larger step.) Never below 0.1% (a series of identical
// values would otherwise make any change infinitely significant). Its own noise in a
// short reference is in the calibrated tables.
func robustSD(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	lo, hi := 0, len(s)
	for drop := max(1, len(s)/4); drop > 0 && hi-lo > 3; drop-- {
		m := median(s[lo:hi])
		at, rest := hi-1, s[lo:hi-1]
		if m-s[lo] > s[hi-1]-m {
			at, rest = lo, s[lo+1:hi]
		}
		if math.Abs(s[at]-mean(rest)) <= outlierSDs(len(rest))*sd(rest) {
			break
		}
		if at == lo {
			lo++
		} else {
			hi--
		}
	}
	return math.Max(sd(s[lo:hi]), math.Max(0.001, resolution(s)))
}

// resolution is the spread a series recorded at a coarse resolution cannot be below: when
// its values tie (at most half of them distinct: a ~20 µs kernel timed to 1 µs reads 19,
// 20, 21), half the smallest step between two of its values, relative to its median — one
// quantum off is then two spreads, never fifty (the trimmed spread of tied values is 0).
// sorted are the values' logs, sorted.
func resolution(sorted []float64) float64 {
	distinct, step := 1, math.Inf(1)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] != sorted[i-1] {
			distinct++
			step = math.Min(step, math.Exp(sorted[i])-math.Exp(sorted[i-1]))
		}
	}
	if distinct*2 > len(sorted) || math.IsInf(step, 1) {
		return 0
	}
	return math.Log1p(step / 2 / math.Exp(median(sorted)))
}

// outlierSDs is how many of the others' standard deviations set a point aside as an
// outlier among n others: 5, and more for a short reference, whose own standard deviation
// is so noisy that a good point often lies 5 of them out (measured: with 8 runs before a
// 10% step at 1% noise, 5 made the test's quantile 7.5 and found it on its first night 85%
// of the time; 80/n, 10 there, makes it 5.8 and 98%).
func outlierSDs(n int) float64 { return max(5, 80/float64(n)) }

// sd is v's standard deviation (0 for fewer than two points).
func sd(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	mu, t := mean(v), 0.0
	for _, x := range v {
		t += (x - mu) * (x - mu)
	}
	return math.Sqrt(t / float64(len(v)-1))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
