package changes

import (
	"math"
	"slices"
	"sort"
)

// Noise that drifts from night to night (thermal, a slowly filling disk, a machine that
// warms through the week) is not independent from run to run: a stretch of runs wanders
// together, and tests calibrated on independent runs (calibrate.go) read its wander as
// level shifts. A series' noise is measured for it: once the shifts are found, the lag-1
// autocorrelation of its runs about their own level's median (phi, an AR(1) model; the
// lesser of it and what its differences say, see differenced). When it
// is clearly positive (above maxWhitePhi, which independent runs of a window's length
// rarely reach), the tests are judged again with their statistics deflated by the
// long-run variance of AR(1) noise, (1+phi)/(1-phi) times a run's — for the newest runs'
// test at most k times (k runs never say less than one) — and phi measured again on the
// fewer shifts that leaves, up to three times. So alpha keeps meaning the share of quiet
// series called changed when nights are not independent, and a series whose runs are
// independent is judged exactly as before.

// maxWhitePhi is the lag-1 autocorrelation above which a series' noise is taken to drift
// (both of its estimates must clear it: each alone exceeds it too often on independent
// runs). 0.25 and 0.2 were tried: they cost steps in the earlier scenarios.
const maxWhitePhi = 0.3

// minDriftRuns is the fewest runs phi is measured on (16 was tried: a young series'
// estimate is too noisy, and cost a 10% step at 2% noise its detection).
const minDriftRuns = 24

// inflated is the factor the tests' variance is deflated by (1 for independent runs).
func (o Options) inflated() float64 { return max(1, o.inflation) }

// drifting is the series' changes with its noise measured (above).
func drifting(s []Obs, y []float64, o Options) []Change {
	white := detect(s, y, o, prefixes{})
	found := white
	for range 3 {
		f := inflationOf(y, found)
		if f <= o.inflated()*1.05 {
			break
		}
		o.inflation = f
		found = detect(s, y, o, prefixes{})
	}
	if o.inflation == 0 {
		return found // independent runs: judged once
	}
	return merge(found, white, o)
}

// merge is the changes found with the noise's drift taken into account, and those found
// taking the runs as independent that are at least twice MinChange: small wander is what
// the drift model forgives, a trend that has carried the runs that far off their level is
// what the gate is for (a drift of 1% a night: its differences drift too, and read as
// strongly correlated noise).
func merge(found, white []Change, o Options) []Change {
	for _, c := range white {
		if math.Abs(math.Log(c.Ratio)) >= math.Log1p(2*o.MinChange) &&
			!slices.ContainsFunc(found, func(d Change) bool { return Same(c, d) }) {
			found = append(found, c)
		}
	}
	sort.SliceStable(found, func(a, b int) bool { return found[a].At < found[b].At })
	return found
}

// inflationOf is the long-run variance factor of y's noise about the changes found,
// (1+phi)/(1-phi), when phi clears maxWhitePhi; else 1.
func inflationOf(y []float64, found []Change) float64 {
	if coarse(y, nil) > 0 {
		return 1 // values that tie: a quantum's dither is no drift, and too coarse to tell one
	}
	phi := math.Min(lagOne(y, found), differenced(y))
	if phi <= maxWhitePhi {
		return 1
	}
	return (1 + phi) / (1 - phi)
}

// differenced is phi as the spreads of y's differences tell it, blind to where the level
// shifts are: AR(1) noise's differences k runs apart vary (1-phi^k)/(1-phi) times as much
// as successive ones, 1+phi at k = 2, 1+phi+phi² at 3, … (a level shift is one outlier
// among the differences of each lag, k of them at lag k, set aside by the robust spread).
// phi is the value whose ratios lie nearest (least squares, in steps of 0.01) those of
// lags 2, 3 and 4 measured: lag 2 alone, used before, was so noisy that a series of
// AR(1) noise at 0.6 read as independent one time in ten, and 18% of those were called
// changed (3.6% of such series with a false change; with lags to 4, 2.5%); lags to 6 read
// a missed small step as drift (a 3% step after a 2% one at 1% noise: found 0.635, not
// 0.67). A median absolute deviation, tried, is too noisy: it let twice the false changes
// through at 0.6. Alone it is too noisy to act on; it keeps a shift the first pass missed
// (which lagOne takes for drift: the runs on each side of it are correlated about a
// median between them) from being deflated out of sight.
func differenced(y []float64) float64 {
	if len(y) < minDriftRuns {
		return 0
	}
	spread := robustSD
	if coarse(y, nil) > 0 { // values that tie: the trimmed spread of tied differences is a quantum's floor, not theirs
		spread = sd
	}
	const lags = 4
	var ratio [lags + 1]float64 // the variance of lag k's differences over lag 1's
	d := make([]float64, 0, len(y))
	for k := 1; k <= lags; k++ {
		d = d[:0]
		for i := k; i < len(y); i++ {
			d = append(d, y[i]-y[i-k])
		}
		ratio[k] = spread(d)
		if k == 1 && ratio[1] <= 0 {
			return 0 // most runs equal: nothing to tell
		}
	}
	for k := lags; k >= 1; k-- {
		ratio[k] = (ratio[k] / ratio[1]) * (ratio[k] / ratio[1])
	}
	best, phi := math.Inf(1), 0.0
	for i := -50; i <= 95; i++ {
		p := float64(i) / 100
		var miss float64
		f := 1.0 // (1-p^k)/(1-p)
		for k := 2; k <= lags; k++ {
			f = 1 + p*f
			miss += (ratio[k] - f) * (ratio[k] - f)
		}
		if miss < best {
			best, phi = miss, p
		}
	}
	return phi
}

// lagOne is the lag-1 autocorrelation of y about its levels (between the pooled changes
// found): each residual from its level's median held within 4 robust spreads (an outlier
// is not drift), then taken about their mean, pairs across a change left out; 0 for a series too short to tell, at most 0.95.
func lagOne(y []float64, found []Change) float64 {
	n := len(y)
	if n < minDriftRuns {
		return 0
	}
	cut := []int{0}
	for _, c := range found {
		if c.Node == "" && c.At > cut[len(cut)-1] && math.Abs(math.Log(c.Ratio)) >= 2.5*c.Noise {
			cut = append(cut, c.At)
		}
	}
	cut = append(cut, n)
	e := make([]float64, n)
	seg := make([]int, n)
	for i := 1; i < len(cut); i++ {
		m := median(y[cut[i-1]:cut[i]])
		for j := cut[i-1]; j < cut[i]; j++ {
			e[j], seg[j] = y[j]-m, i
		}
	}
	lim := 4 * robustSD(e)
	for j := range e {
		e[j] = math.Max(-lim, math.Min(lim, e[j]))
	}
	for i := 1; i < len(cut); i++ { // about each level's mean: a median of values that tie is a quantum, off their mean
		m := mean(e[cut[i-1]:cut[i]])
		for j := cut[i-1]; j < cut[i]; j++ {
			e[j] -= m
		}
	}
	var num, den float64
	for j := range e {
		den += e[j] * e[j]
		if j > 0 && seg[j] == seg[j-1] {
			num += e[j] * e[j-1]
		}
	}
	if den == 0 {
		return 0
	}
	return math.Min(0.95, num/den)
}
