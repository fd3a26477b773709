// The rank test over every split (binary segmentation) for the shifts before the newest
// runs, and where a split is placed (the least absolute deviation, by a running median).

package changes

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"sort"
)

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
// simulates it. Values that tie (recorded at a coarse resolution) have their average rank,
// and the spread they are standardized by is the one their ranks would have were the ties
// broken at random (ranked.ties): standardized by the smaller spread of average ranks, two
// runs one quantum up after eleven level ones would be 3.5 of them, where the chance of that
// pattern is one in 78.
func levelOfRanks(rk ranked) (at, s, e int, z float64) {
	r := rk.r
	m := len(r)
	p, q, w := make([]float64, m+1), make([]float64, m+1), make([]float64, m+1)
	for i, v := range r {
		p[i+1], q[i+1], w[i+1] = p[i]+v, q[i]+v*v, w[i]
		if rk.ties != nil {
			w[i+1] += rk.ties[i]
		}
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
			v := ((q[b] - q[a]) - l*mu*mu + (w[b] - w[a])) / (l - 1)
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

func (h floatHeap) Len() int { return len(h) }

func (h floatHeap) Less(i, j int) bool { return h[i] < h[j] }

func (h floatHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *floatHeap) Push(v any) { *h = append(*h, v.(float64)) }

func (h *floatHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

func (h floatHeap) top() float64 { return h[0] }

// ranked are a series' ranks, 1-based, ties given their average (r), and for each point
// the variance its rank would have were its ties broken at random (ties: (t²−1)/12 for a
// value that t values share, 0 for one that ties with none; nil when none tie).
type ranked struct{ r, ties []float64 }

// ranks are y's ranks (ranked).
func ranks(y []float64) ranked {
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
	out := ranked{r: make([]float64, len(y))}
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1].v == idx[i].v {
			j++
		}
		avg := float64(i+j)/2 + 1
		if t := float64(j - i + 1); t > 1 && out.ties == nil {
			out.ties = make([]float64, len(y))
		}
		for k := i; k <= j; k++ {
			out.r[idx[k].i] = avg
			if out.ties != nil {
				t := float64(j - i + 1)
				out.ties[idx[k].i] = (t*t - 1) / 12
			}
		}
		i = j + 1
	}
	return out
}
