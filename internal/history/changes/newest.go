// The newest runs' test: the newest 1, 2, 3 or 5 runs against the level before them, in
// units of that level's robust spread (means and a quantum's floor for values that tie).

package changes

import (
	"math"
	"slices"
)

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
		if ofItsKind(s[from:n-k], y[from:n-k], s[n-k:], med, c, o) {
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
