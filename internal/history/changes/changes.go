// Package changes finds where a series' level shifted, and says how sure it is: a rank
// test over every split (Pettitt's statistic and the largest standardized Mann–Whitney
// statistic, each with its p-value for the largest of many splits), binary segmentation
// for several shifts, a test of the newest points against the noise the series has
// already shown, and Benjamini–Hochberg over every series' tests together. It works on
// the logarithm of the metric (noise is a proportion of the level), so a ratio is a
// difference. docs/history.md gives the method and its measured error rates.
package changes

import (
	"maps"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
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
	FDR       float64 // Benjamini–Hochberg's q over all tests of all series
	// ConfirmAfter is how many runs of the new level make a change confirmed; fewer is
	// suspected (a shift at the newest runs).
	ConfirmAfter int
}

// Defaults are the thresholds docs/history.md measured.
var Defaults = Options{MinChange: 0.02, FDR: 0.05, ConfirmAfter: 3}

// Change is one shift found in a series.
type Change struct {
	At    int     // index of the first point of the new level
	Ratio float64 // new level / old level (medians), of the metric
	P     float64 // the test's p-value (before the correction over all tests)
	After int     // points of the new level
	// Tail is whether it was found by the newest points' test (a shift too recent for
	// the rank test: one or two runs).
	Tail bool
	// Node is set when the shift shows in that node's points only (the series pooled
	// over its nodes shows none near it).
	Node string
}

// minPoints is the fewest points a series needs before its level can be tested.
const minPoints = 6

// Detect finds the changes in every series (each oldest first) with the false discovery
// rate controlled over all of them: every series contributes its tests' p-values (Test),
// one Benjamini–Hochberg threshold is set over them all (Threshold), and a shift is called
// when its test clears that threshold and it is at least MinChange, and outside the runs'
// own spreads where they recorded them (Find). A caller holding too many series to keep
// them all at once makes the same three steps itself, in batches.
func Detect(series [][]Obs, o Options) [][]Change {
	tests := make([]Tests, len(series))
	var ps []float64
	for i, s := range series {
		tests[i] = Test(s)
		ps = append(ps, tests[i].Ps()...)
	}
	t := Threshold(ps, o.FDR)
	out := make([][]Change, len(series))
	for i, s := range series {
		out[i] = Find(s, tests[i], t, len(series), o)
	}
	return out
}

// Tests are one series' p-values, before the threshold over all series is known.
type Tests struct {
	Level, Tail       float64 // 1 when not tested (too few points)
	HasLevel, HasTail bool
	Nodes             map[string]float64 // each node's own level test, when it has enough points
}

// Ps are the p-values the tests contribute to the correction.
func (x Tests) Ps() []float64 {
	var out []float64
	if x.HasLevel {
		out = append(out, x.Level)
	}
	if x.HasTail {
		out = append(out, x.Tail)
	}
	for _, p := range x.Nodes {
		out = append(out, p)
	}
	return out
}

// Min is the smallest of the tests' p-values (1 when none): a series whose Min does not
// clear the threshold has no change.
func (x Tests) Min() float64 {
	m := 1.0
	for _, p := range x.Ps() {
		m = math.Min(m, p)
	}
	return m
}

// Test is the series' tests: its best split, its newest runs, and each node's own runs.
func Test(s []Obs) Tests {
	y := logsOf(s)
	x := Tests{Level: 1, Tail: 1}
	if len(y) >= minPoints {
		_, x.Level = bestSplit(y)
		x.HasLevel = true
	}
	x.Tail, x.HasTail = tailP(y, 0)
	if !x.HasTail {
		x.Tail = 1
	}
	for _, n := range nodesOf(s) {
		if _, sub := nodePoints(s, y, n); len(sub) >= 2*minPoints {
			if x.Nodes == nil {
				x.Nodes = map[string]float64{}
			}
			_, x.Nodes[n] = bestSplit(sub)
		}
	}
	return x
}

func logsOf(s []Obs) []float64 {
	y := make([]float64, len(s))
	for j, x := range s {
		y[j] = math.Log(x.V)
	}
	return y
}

// Find is the series' changes, given its tests and the threshold t set over the tests of
// all nSeries series.
func Find(s []Obs, x Tests, t float64, nSeries int, o Options) []Change {
	if x.Min() > t {
		return nil
	}
	y := logsOf(s)
	sub := o.FDR / float64(max(1, nSeries))
	var out []Change
	if x.HasLevel && x.Level <= t {
		out = append(out, segment(s, y, t, sub, o)...)
	}
	// a shift in one node's points, where the series pooled over its nodes shows none
	// near it: that node's alone
	for _, n := range slices.Sorted(maps.Keys(x.Nodes)) {
		if x.Nodes[n] > t {
			continue
		}
		idx, ny := nodePoints(s, y, n)
		subObs := make([]Obs, len(idx))
		for j, i := range idx {
			subObs[j] = s[i]
		}
		for _, ch := range segment(subObs, ny, t, sub, o) {
			ch.At, ch.Node = idx[ch.At], n
			near := false
			for _, d := range out {
				near = near || d.Node == "" && abs(d.At-ch.At) <= 2*len(nodesOf(s))
			}
			if !near {
				out = append(out, ch)
			}
		}
	}
	// the newest points are judged against the level since the series' last shift: the
	// test is made again from there (its p-value can only grow), and must still clear t
	if x.HasTail && x.Tail <= t {
		from := 0
		for _, ch := range out {
			from = max(from, ch.At)
		}
		if p, ok := tailP(y, from); ok && p <= t {
			if ch, ok := tailChange(s, y, from, p, o); ok {
				out = append(out, ch)
			}
		}
	}
	return tidy(out, len(s))
}

// tidy sorts a series' changes and drops a tail shift the rank test also found.
func tidy(cs []Change, n int) []Change {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Tail != cs[j].Tail {
			return !cs[i].Tail // the rank test's findings first: they win
		}
		return cs[i].At < cs[j].At
	})
	var out []Change
	for _, c := range cs {
		dup := false
		for _, d := range out {
			if abs(c.At-d.At) <= 2 {
				dup = true
			}
		}
		if !dup {
			c.After = n - c.At
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Threshold is Benjamini–Hochberg's: the largest p(k) with p(k) <= q·k/m, or 0 when no
// p-value clears its line (nothing is called).
func Threshold(ps []float64, q float64) float64 {
	s := slices.Clone(ps)
	slices.Sort(s)
	m := float64(len(s))
	t := 0.0
	for k, p := range s {
		if p <= q*float64(k+1)/m {
			t = p
		}
	}
	return t
}

// segment is binary segmentation of y: the best split, kept when its p-value clears t
// and its shift is large enough, then each side again.
//
// A split inside a side is a test the correction did not count: it is held to sub, a
// Bonferroni bound over the series (Detect passes FDR / series).
func segment(s []Obs, y []float64, t, sub float64, o Options) []Change {
	var out []Change
	var walk func(a, b int)
	walk = func(a, b int) {
		if b-a < minPoints {
			return
		}
		_, p := bestSplit(y[a:b])
		if p > t {
			return
		}
		t = math.Min(t, sub)
		at := a + locate(y[a:b])
		if r, ok := shift(s, y, a, at, b, o); ok {
			out = append(out, Change{At: at, Ratio: r, P: p})
		}
		walk(a, at)
		walk(at, b)
	}
	walk(0, len(y))
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

// bestSplit is the split of y most likely to separate two levels (the first index of
// the second: where Pettitt's statistic, the rank CUSUM, peaks) and its p-value: the
// smaller of Pettitt's and the Bonferroni-bounded largest standardized Mann–Whitney
// statistic (stronger near the ends), doubled for taking the smaller. Ranks make
// it blind to how far an outlier lies. Both sides hold at least two points.
func bestSplit(y []float64) (int, float64) {
	m := len(y)
	r := ranks(y)
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

// tailMin is the fewest earlier points the newest points are judged against.
const tailMin = 8

// tails are how many newest points the tail test takes together: a shift with more runs
// after it is the rank test's.
var tails = []int{1, 2, 3, 5}

// tailP is the p-value that the newest k points (k = 1, 2, 3, 5) left the series' level:
// their mean (one or two) or median against the median and robust spread (1.4826·MAD)
// of every point before them since from, as Student's t with the reference's degrees of freedom (the spread is
// estimated), the median's standard error taken as 1.2533·sd/√k; the smallest over k,
// times the number of k tried. ok is false when the series is too short to judge.
func tailP(y []float64, from int) (float64, bool) {
	best := 1.0
	tried := 0
	for _, k := range tails {
		ref, tl, good := tailSplit(y, from, k)
		if !good {
			continue
		}
		tried++
		med, sd := median(ref), robustSD(ref)
		se := sd / math.Sqrt(float64(k))
		if k > 2 {
			se *= 1.2533 // a median's, not a mean's
		}
		z := math.Abs(center(tl)-med) / se
		t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(ref) - 1)}
		best = math.Min(best, 2*t.Survival(z))
	}
	return math.Min(1, best*float64(tried)), tried > 0
}

// center is the newest points' level: their mean when one or two, else their median.
func center(v []float64) float64 {
	if len(v) <= 2 {
		return mean(v)
	}
	return median(v)
}

// tailSplit is the reference points (those since from) and the newest k.
func tailSplit(y []float64, from, k int) (ref, tl []float64, ok bool) {
	n := len(y)
	if n-k-from < tailMin {
		return nil, nil, false
	}
	return y[from : n-k], y[n-k:], true
}

// tailChange is the newest points' shift, when it is large enough and beyond every
// deviation the runs of the level since from showed in its direction (each of one or two newest
// points; the median of more): noise the series has already seen never makes a change.
// The longest such tail is taken: more runs at a new level say more.
func tailChange(s []Obs, y []float64, from int, p float64, o Options) (Change, bool) {
	for i := len(tails) - 1; i >= 0; i-- {
		k := tails[i]
		ref, tl, ok := tailSplit(y, from, k)
		if !ok {
			continue
		}
		med := median(ref)
		up := center(tl) > med
		seen := 0.0
		for _, v := range y[from : len(y)-k] { // every run of this level
			if d := v - med; (d > 0) == up {
				seen = math.Max(seen, math.Abs(d))
			}
		}
		check := tl
		if k > 2 {
			check = []float64{median(tl)}
		}
		// the newest points agree on a new level: each at least half as far from the old
		// one as their center (one slow run after an ordinary one is not two at a new level)
		for _, v := range tl {
			if k > 1 && math.Abs(v-med) < math.Abs(center(tl)-med)/2 {
				check = nil
			}
		}
		beyond := len(check) > 0
		for _, v := range check {
			if (v > med) != up || math.Abs(v-med) <= seen {
				beyond = false
			}
		}
		if !beyond {
			continue
		}
		at := len(y) - k
		r, ok := shift(s, y, from, at, len(y), o)
		if ok {
			return Change{At: at, Ratio: r, P: p, Tail: true}, true
		}
	}
	return Change{}, false
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

// Confined are the nodes whose points after a change show it, when some nodes' points
// after it do not (nil when every node's do, or the series has one node): a shift that
// is one node's.
func Confined(s []Obs, at int, before, ratio float64) []string {
	nodes := nodesOf(s[at:])
	if nodes == nil {
		return nil
	}
	var show []string
	for _, n := range nodes {
		var v []float64
		for _, x := range s[at:] {
			if x.Node == n {
				v = append(v, math.Log(x.V))
			}
		}
		if math.Abs(median(v)-before) >= math.Abs(math.Log(ratio))/2 {
			show = append(show, n)
		}
	}
	if len(show) == len(nodes) {
		return nil
	}
	return show
}

// Level is the log of the median of s[a:b], the level Confined compares with.
func Level(s []Obs, a, b int) float64 {
	v := make([]float64, 0, b-a)
	for _, x := range s[a:b] {
		v = append(v, math.Log(x.V))
	}
	return median(v)
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

// robustSD is the spread of v's noise: the larger of 1.4826 times the median absolute
// deviation (blind to outliers, but itself noisy: a lucky small one would make ordinary
// noise look significant) and the standard deviation of the points within 3.5 of those
// of the median (efficient); never below 0.1% (a series of identical values would
// otherwise make any change infinitely significant).
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
	sd := 0.0
	if len(kept) > 1 {
		mu := mean(kept)
		for _, x := range kept {
			sd += (x - mu) * (x - mu)
		}
		sd = math.Sqrt(sd / float64(len(kept)-1))
	}
	return math.Max(math.Max(mad, sd), 0.001)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
