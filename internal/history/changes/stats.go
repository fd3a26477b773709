// The statistics every test shares: levels (medians; means of values that tie), the
// robust spread and the resolution of values recorded at a coarse resolution.

package changes

import (
	"math"
	"slices"
)

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
	distinct := 1
	for i := 1; i < len(sorted); i++ {
		if sorted[i] != sorted[i-1] {
			if distinct++; distinct*2 > len(sorted) {
				return 0 // values that do not tie: the common case, told before any step is measured
			}
		}
	}
	step := math.Inf(1)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] != sorted[i-1] {
			step = math.Min(step, math.Exp(sorted[i])-math.Exp(sorted[i-1]))
		}
	}
	if math.IsInf(step, 1) {
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
