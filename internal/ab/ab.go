// Package ab judges a case measured as pairs — its base and its head side by side on one
// node in one allocation, in ABBA order — with one verdict: the ratio head/base of its
// metric, with a confidence interval from the pairs alone, and slower, faster, same or
// unsure (issue 59's paired A/B).
//
// Each pair gives the log ratio of its head to its base: what the node, its clocks and the
// hour add to both sides cancels in it (a node 10% slower than another moves both of a
// pair's runs). The ratio is the Hodges–Lehmann estimate of the pairs' log ratios (the
// median of their pairwise means), its interval the Wilcoxon signed-rank interval —
// exact for any noise symmetric about the true ratio, no normality assumed, computed from
// the signed-rank statistic's exact distribution. ABBA order (AB, then BA) cancels a
// linear drift within the allocation (warming, throttling) between the two orders' pairs.
//
// The verdict (for a metric where lower is better; the other way round otherwise):
//   - slower: the whole interval lies above 1, and the estimate is at least Same above;
//   - faster: the same, below;
//   - same: the whole interval lies within Threshold of 1: no change the check would fail
//     on (equivalence, not absence of proof; within Same, 1%, would take some 20 pairs at
//     1% noise to say of most unchanged cases);
//   - unsure: anything else — the case is given more pairs (Rounds), up to MaxPairs.
//
// A PR's check fails on a slower case whose whole interval lies beyond Threshold (Fails),
// the interval taken at the level the check's cases together keep (Cases: 1-(1-Level)/m
// for m cases, so that an A/A pull request of m cases fails at most 1-Level of the time,
// not m times that); a slower case not yet beyond it at that level is given more pairs.
// An unsure or barely slower case is named, never failed.
package ab

import (
	"fmt"
	"math"
	"slices"
)

// Pair is one base and one head measurement of a case's metric, on one node, in turn.
type Pair struct{ Base, Head float64 }

// Options are the judgement's rules.
type Options struct {
	Same      float64 // a slower or faster case is at least this far from 1 (0.01: 1%)
	Threshold float64 // the check fails on a slower case whose interval lies beyond it (0.02)
	Level     float64 // the interval's confidence (0.99)
	// MinPairs are measured of every case (2 pairs a round: AB, BA); an unsure case gets
	// another round until MaxPairs.
	MinPairs, MaxPairs int
	// Cases is how many cases the check judges together (0 or 1: one): a case fails the
	// check only when its interval at level 1-(1-Level)/Cases lies beyond Threshold.
	// opx run --ab sets it to the run's planned cases (every shard's), and Judged to at
	// least the cases measured.
	Cases int `json:",omitempty"`
}

// Defaults are the PR gate's rules.
var Defaults = Options{Same: 0.01, Threshold: 0.02, Level: 0.99, MinPairs: 8, MaxPairs: 20}

// Verdict is what a case's pairs say.
type Verdict string

const (
	Slower Verdict = "slower"
	Faster Verdict = "faster"
	Same   Verdict = "same"
	Unsure Verdict = "unsure"
)

// Result is a case's judgement: its Ratio (head/base of the metric) within [Lo, Hi] at
// the options' Level, from Pairs pairs (Ratio 0 with no pair; Lo and Hi 0 when the pairs
// are too few to bound it at that level: fewer than 8 at 99%).
type Result struct {
	Pairs   int     `json:"pairs"`
	Ratio   float64 `json:"ratio"`
	Lo      float64 `json:"ratio_lo"`
	Hi      float64 `json:"ratio_hi"`
	Verdict Verdict `json:"verdict"`
	// Fails is whether the check fails on it: slower, its whole interval beyond Threshold
	// at the check's level (Options.Cases).
	Fails bool `json:"fails"`
	// Beyond is whether its estimate is slower beyond Threshold: a slower case that does not
	// fail yet, and could with more pairs.
	Beyond bool `json:"beyond_threshold,omitempty"`
}

// Judge is the case's judgement from its pairs; lower is whether a lower metric is better
// (a latency; a throughput is not). A pair with a value that is not a finite number above
// 0 is an error: nothing opx measured.
func Judge(pairs []Pair, lower bool, o Options) (Result, error) {
	d := make([]float64, 0, len(pairs))
	for i, p := range pairs {
		if !(p.Base > 0) || !(p.Head > 0) || math.IsInf(p.Base, 0) || math.IsInf(p.Head, 0) {
			return Result{}, fmt.Errorf("pair %d: base %v, head %v: not a measured value", i+1, p.Base, p.Head)
		}
		d = append(d, math.Log(p.Head/p.Base))
	}
	r := Result{Pairs: len(d), Verdict: Unsure}
	if len(d) == 0 {
		return r, nil
	}
	est, lo, hi := signedRank(d, 1-o.Level)
	r.Ratio = math.Exp(est)
	if !math.IsInf(lo, 0) {
		r.Lo, r.Hi = math.Exp(lo), math.Exp(hi)
	}
	same := math.Log1p(o.Same)
	slower, faster := lo > 0 && est >= same, hi < 0 && est <= -same
	if !lower {
		slower, faster = faster, slower
	}
	switch {
	case slower:
		r.Verdict = Slower
		beyond := math.Log1p(o.Threshold)
		r.Beyond = lower && est > beyond || !lower && est < -beyond
		flo, fhi := lo, hi
		if o.Cases > 1 { // the check's level: its cases together
			_, flo, fhi = signedRank(d, (1-o.Level)/float64(o.Cases))
		}
		r.Fails = lower && flo > beyond || !lower && fhi < -beyond
	case faster:
		r.Verdict = Faster
	case lo >= -math.Log1p(o.Threshold) && hi <= math.Log1p(o.Threshold):
		r.Verdict = Same
	}
	return r, nil
}

// PairsToFail is the fewest pairs with which a case can fail the check at o's level for
// o.Cases cases: below it the exact interval is every value (2/2^n above the error).
func PairsToFail(o Options) int {
	alpha := 1 - o.Level
	if o.Cases > 1 {
		alpha /= float64(o.Cases)
	}
	n := 1
	for lowerCount(n, alpha/2) == 0 && n < 64 {
		n++
	}
	return n
}

// HeadFirst is whether the pair at index i (from 0) measures its head first: ABBA order,
// AB then BA, so that a linear drift through the allocation adds to one pair's ratio what
// it takes from the next's.
func HeadFirst(i int) bool { return i%2 == 1 }

// More is how many more pairs the case is to be given: none once it is decided (not
// unsure, and not slower beyond the threshold without failing yet at the check's level)
// or has MaxPairs; else a round (2: AB, BA), or up to MinPairs.
func More(r Result, o Options) int {
	switch {
	case r.Pairs < o.MinPairs:
		return o.MinPairs - r.Pairs
	case r.Pairs >= o.MaxPairs:
		return 0
	case r.Verdict == Unsure, r.Verdict == Slower && r.Beyond && !r.Fails:
		return min(2, o.MaxPairs-r.Pairs)
	}
	return 0
}

// signedRank is the Hodges–Lehmann estimate of d's centre and its Wilcoxon signed-rank
// interval at error alpha (two-sided): the k-th smallest and largest of the n(n+1)/2
// Walsh averages, k the largest count with P(T < k) <= alpha/2 under the signed-rank
// null. Too few pairs to reach the level give the widest interval: every value.
func signedRank(d []float64, alpha float64) (est, lo, hi float64) {
	n := len(d)
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range d {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	slices.Sort(walsh)
	m := len(walsh)
	if m%2 == 1 {
		est = walsh[m/2]
	} else {
		est = (walsh[m/2-1] + walsh[m/2]) / 2
	}
	k := lowerCount(n, alpha/2)
	if k == 0 {
		return est, math.Inf(-1), math.Inf(1)
	}
	return est, walsh[k-1], walsh[m-k]
}

// lowerCount is the largest k with P(T <= k-1) <= p, T the signed-rank statistic of n
// pairs under the null (each rank's sign a fair coin): its exact distribution, counted.
func lowerCount(n int, p float64) int {
	top := n * (n + 1) / 2
	ways := make([]float64, top+1) // ways[t]: sign patterns of the ranks so far summing to t
	ways[0] = 1
	for r := 1; r <= n; r++ {
		for t := top; t >= r; t-- {
			ways[t] += ways[t-r]
		}
	}
	total := math.Ldexp(1, n)
	cum, k := 0.0, 0
	for t := 0; t <= top; t++ {
		cum += ways[t] / total
		if cum > p {
			break
		}
		k = t + 1
	}
	return k
}
