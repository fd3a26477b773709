// Package changes finds where a series' level shifted, and says how sure it is. Each
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
	n := len(s)
	if young, _ := Young(n); young {
		return nil
	}
	y := logsOf(s)
	var out []Change
	end := n
	if ch, ok := newest(s, y, o); ok {
		out, end = append(out, ch), ch.At
	}
	out = append(segment(s, y, 0, end, o.Alpha/4, o), out...)
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
		for _, ch := range segment(sub, ny, 0, len(ny), o.Alpha/4/float64(len(tested)), o) {
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
// before them — when their calibrated p-value clears Alpha/2 over the k tried, they agree
// on a new level (each on its side, at least half as far from the old level as their
// centre, and within 5 times the noise or a tenth of the shift of it: an outlier and the
// level after it are not one level) and it is large enough. The longest such tail is taken (more runs at a new level
// say more), and dated at its first run: the runs just before it that lie nearer the new
// level than the old one join it.
func newest(s []Obs, y []float64, o Options) (Change, bool) {
	n := len(y)
	alpha := o.Alpha / 2 / float64(len(Tails))
	for i := len(Tails) - 1; i >= 0; i-- {
		k := Tails[i]
		if n-k < MinRef {
			continue
		}
		from := 0
		if pre := segment(s, y, 0, n-k, o.Alpha/4, o); len(pre) > 0 {
			from = pre[len(pre)-1].At
		}
		ref, tl := y[from:n-k], y[n-k:]
		if len(ref) < MinRef {
			continue
		}
		med, sd := median(ref), robustSD(ref)
		p := tailP(tailStat(tl, med, sd), len(ref), k)
		if p > alpha {
			continue
		}
		c := center(tl)
		// one level: each within 5 times the noise of the centre, or a tenth of the shift
		// (a reference's spread of a few runs may be lucky and small)
		tol := math.Max(5*sd, math.Abs(c-med)/10)
		agree := true
		for _, v := range tl {
			agree = agree && (v > med) == (c > med) && math.Abs(v-med) >= math.Abs(c-med)/2 && math.Abs(v-c) <= tol
		}
		if !agree {
			continue
		}
		at := n - k
		for at-1 > from && math.Abs(y[at-1]-c) < math.Abs(y[at-1]-med) && math.Abs(y[at-1]-c) <= tol {
			at--
		}
		if r, ok := shift(s, y, from, at, n, o); ok {
			return Change{At: at, Ratio: r, P: p * float64(len(Tails)), Tail: true, Level: median(y[at:n]), Noise: sd}, true
		}
	}
	return Change{}, false
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
// p-value clears alpha and its shift is large enough, then each side again, each split
// judged on its own evidence at the same level.
func segment(s []Obs, y []float64, a, b int, alpha float64, o Options) []Change {
	var out []Change
	var walk func(a, b int)
	walk = func(a, b int) {
		if b-a < minPoints {
			return
		}
		_, stat := bestSplit(y[a:b])
		p := levelP(stat, b-a)
		if p > alpha {
			return
		}
		at := a + locate(y[a:b])
		if r, ok := shift(s, y, a, at, b, o); ok {
			out = append(out, Change{At: at, Ratio: r, P: p, Level: median(y[at:b]), Noise: robustSD(y[a:at])})
		}
		walk(a, at)
		walk(at, b)
	}
	walk(a, b)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// shift is the ratio of the levels of y[at:b] and y[a:at] (their medians), when it is at
// least MinChange and the new level is outside the old runs' typical recorded spread.
func shift(s []Obs, y []float64, a, at, b int, o Options) (float64, bool) {
	before, after := median(y[a:at]), median(y[at:b])
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

// bestSplit is the split of y most likely to separate two levels and the level
// statistic: an uncalibrated p-value (see splitOfRanks) that levelP calibrates.
func bestSplit(y []float64) (int, float64) { return splitOfRanks(ranks(y)) }

// splitOfRanks is, for a series' ranks, where Pettitt's statistic (the rank CUSUM) peaks
// and the level statistic: the smaller of Pettitt's approximate p-value and the
// Bonferroni-bounded largest standardized Mann–Whitney statistic (stronger near the ends),
// doubled. Ranks make it blind to how far an outlier lies. Both sides hold at least two
// points.
func splitOfRanks(r []float64) (int, float64) {
	m := len(r)
	mf := float64(m)
	var sum float64
	bestK, bestZ := 0.0, 0.0
	atK := 0
	for t := 1; t < m; t++ {
		sum += r[t-1]
		if t < 2 || m-t < 2 {
			continue
		}
		tf := float64(t)
		u := 2*sum - tf*(mf+1)
		if math.Abs(u) > bestK {
			bestK, atK = math.Abs(u), t
		}
		z := math.Abs(u) / math.Sqrt(tf*(mf-tf)*(mf+1)/3)
		bestZ = math.Max(bestZ, z)
	}
	pPettitt := math.Min(1, 2*math.Exp(-6*bestK*bestK/(mf*mf*mf+mf*mf)))
	pZ := math.Min(1, float64(m-3)*math.Erfc(bestZ/math.Sqrt2))
	return atK, math.Min(1, 2*math.Min(pPettitt, pZ))
}

// locate is where a level shift in y most likely is, once the rank test says there is
// one: the split with the least total absolute deviation of each side from its median
// (the rank statistic's peak wanders by several runs; this does not, and an outlier
// weighs only its distance). Both sides hold at least two points.
func locate(y []float64) int {
	best, at := math.Inf(1), 0
	for t := 2; t <= len(y)-2; t++ {
		if c := deviation(y[:t]) + deviation(y[t:]); c < best {
			best, at = c, t
		}
	}
	return at
}

// deviation is the total absolute deviation of v from its median.
func deviation(v []float64) float64 {
	m := median(v)
	d := 0.0
	for _, x := range v {
		d += math.Abs(x - m)
	}
	return d
}

// ranks are y's ranks, 1-based, ties given their average.
func ranks(y []float64) []float64 {
	idx := make([]int, len(y))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return y[idx[a]] < y[idx[b]] })
	r := make([]float64, len(y))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && y[idx[j+1]] == y[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
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

// Attribute names the nodes a change at index at (of the ratio found) is confined to,
// on evidence only: each point after the change is set against its own node's level
// before it (the pooled level for a node with fewer than two points before), and each
// node's residuals with at least MinNodeRuns points after are compared with the rest's
// (Mann–Whitney), Holm-corrected at alpha over the nodes (a Kruskal–Wallis omnibus first
// was tried: one slow node among six is too small a part of it to clear). The nodes named
// differ from the rest and show the change (at least half of it, on its side) while the
// rest do not. nil when no node differs, fewer than two nodes can be judged, or every
// node shows it.
func Attribute(s []Obs, at int, ratio, alpha float64) []string {
	nodes := nodesOf(s[at:])
	if nodes == nil {
		return nil
	}
	y := logsOf(s)
	pooled := median(y[max(0, at-30):at])
	res := map[string][]float64{}
	for _, nd := range nodes {
		var before []float64
		for i := at - 1; i >= 0 && len(before) < 30; i-- {
			if s[i].Node == nd {
				before = append(before, y[i])
			}
		}
		lvl := pooled
		if len(before) >= 2 {
			lvl = median(before)
		}
		for i := at; i < len(s); i++ {
			if s[i].Node == nd {
				res[nd] = append(res[nd], y[i]-lvl)
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

// Level is the log of the median of s[a:b].
func Level(s []Obs, a, b int) float64 {
	v := make([]float64, 0, b-a)
	for _, x := range s[a:b] {
		v = append(v, math.Log(x.V))
	}
	return median(v)
}

func median(v []float64) float64 { return medianInto(make([]float64, len(v)), v) }

// medianInto is v's median, sorted in scratch (at least len(v) long).
func medianInto(scratch, v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := scratch[:len(v)]
	copy(s, v)
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

// robustSD is the spread of v's noise: the standard deviation of the points within 3.5
// times 1.4826·MAD of the median (efficient, and an outlier weighs nothing in it: never
// the single largest deviation), 1.4826·MAD itself when fewer than two are left; never
// below 0.1% (a series of identical values would otherwise make any change infinitely
// significant). Its own noise in a short reference is in the calibrated tables.
func robustSD(v []float64) float64 {
	m := median(v)
	d := make([]float64, len(v))
	for i, x := range v {
		d[i] = math.Abs(x - m)
	}
	mad := 1.4826 * median(d)
	var kept []float64
	for _, x := range v {
		if math.Abs(x-m) <= 3.5*mad {
			kept = append(kept, x)
		}
	}
	sd := mad
	if len(kept) > 1 {
		sd = 0
		mu := mean(kept)
		for _, x := range kept {
			sd += (x - mu) * (x - mu)
		}
		sd = math.Sqrt(sd / float64(len(kept)-1))
	}
	return math.Max(sd, 0.001)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
