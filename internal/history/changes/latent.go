package changes

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Levels no recorded field explains: a series measured on machines that differ, where the
// contexts recorded nothing that tells them apart (a pool of hosted CI runners whose CPU
// went unrecorded, a store written before opx recorded it), alternates between two or
// three levels from run to run. Judged as one level, each change of the mix reads as a
// shift, and a few nights on the slow machines as a pair of opposite changes. Such a
// series is multimodal: its points fall into groups with a clear gap between their levels
// (each side's points far tighter than the gap), and the groups take turns in time — each
// ran, then the other, then it again. Each group is then judged as a kind of machine of
// its own (kinds.go), named "unrecorded level 1" (the lowest) and so on: a change of the
// mix is said as one, and a step on every group is still a step.
//
// A step is never such a group: its two sides do not take turns (one ran, then the other
// for good), and neither do the two sides of a lone excursion (one ran, the other for a
// few nights, then the first again: three turns, fewer than the five asked for); nor is a
// node that moved from one group to the other for good (a node that slowed down: a change
// of that node, which the nodes' own tests find). Values that tie (a coarse resolution:
// resolution) are never levels: a level between two quanta takes turns between them.

// minTurns is the fewest stretches two adjacent levels take in time order (a turn ends
// where the other runs) to be levels: a, b, a, b, a.
const minTurns = 5

// minLatentRuns is the fewest points of a level no recorded field explains: three nights
// on the slow machines, each apart (a lone outlier, or two, are not a level).
const minLatentRuns = 3

// maxLatent is the most levels a series is split into.
const maxLatent = 3

// latentGap is how many of each side's spreads the gap between two levels clears.
const latentGap = 6

// Labelled is the series with each point's Kind: as its context recorded it, or, where
// its points record no two kinds, the level no recorded field explains that the point
// lies at ("unrecorded level 1", the lowest, ...; "NVIDIA H200, unrecorded level 1" where
// every point records that one kind) when the series is multimodal (above); the series
// itself otherwise. Every entry point of the detector judges the
// labelled series, so it is safe to call twice.
func Labelled(s []Obs, o Options) []Obs {
	if len(s) < 2*minLatentRuns+1 {
		return s
	}
	recorded := "" // the one kind the series' points record, if any
	for _, x := range s {
		if x.Kind != "" && recorded != "" && x.Kind != recorded {
			return s // kinds recorded: they alone judge it
		}
		recorded = cmp.Or(x.Kind, recorded)
	}
	y := logsOf(s)
	sorted := slices.Clone(y)
	slices.Sort(sorted)
	if resolution(sorted) > 0 {
		return s // values that tie: their quanta are not levels
	}
	groups := levels(y, o)
	if groups == nil || nodeMoved(s, groups) {
		return s
	}
	out := slices.Clone(s)
	name := "unrecorded level %d"
	if recorded != "" {
		name = recorded + ", " + name // one kind recorded, and levels it does not explain
	}
	for g, in := range groups { // lowest level first
		for _, i := range in {
			out[i].Kind = fmt.Sprintf(name, g+1)
		}
	}
	return out
}

// levels are the points' groups (indices, each in time order, the lowest level first)
// when the series is multimodal: the widest gaps between the points' sorted levels that
// leave minLatentRuns on each side cut them into three groups, else two, when every gap
// clears latentGap of its two groups' spreads (spreadInTime) and twice MinChange, and
// every two adjacent groups take minTurns turns; nil when no cut does.
func levels(y []float64, o Options) [][]int {
	byLevel := make([]int, len(y))
	for i := range byLevel {
		byLevel[i] = i
	}
	slices.SortFunc(byLevel, func(i, j int) int { return cmp.Compare(y[i], y[j]) })
	var cuts []int // the gaps, widest first
	for c := minLatentRuns; c <= len(y)-minLatentRuns; c++ {
		cuts = append(cuts, c)
	}
	gap := func(c int) float64 { return y[byLevel[c]] - y[byLevel[c-1]] }
	slices.SortStableFunc(cuts, func(a, b int) int { return cmp.Compare(gap(b), gap(a)) })
	for k := maxLatent; k >= 2; k-- {
		var chosen []int
		for _, c := range cuts {
			if len(chosen) == k-1 {
				break
			}
			ok := true
			for _, d := range chosen {
				ok = ok && abs(c-d) >= minLatentRuns
			}
			if ok {
				chosen = append(chosen, c)
			}
		}
		if len(chosen) < k-1 {
			continue
		}
		slices.Sort(chosen)
		groups := make([][]int, k)
		from := 0
		for g := range k {
			to := len(y)
			if g < k-1 {
				to = chosen[g]
			}
			groups[g] = slices.Clone(byLevel[from:to])
			slices.Sort(groups[g])
			from = to
		}
		ok := true
		for g := 1; g < k && ok; g++ {
			d := gap(chosen[g-1])
			ok = d >= 2*o.MinChange && d >= latentGap*math.Max(spreadInTime(groups[g-1], y), spreadInTime(groups[g], y)) &&
				turns(groups[g-1], groups[g]) >= minTurns
		}
		if ok {
			return groups
		}
	}
	return nil
}

// turns is how many stretches the points of a and b (indices, each in time order) take in
// time order: a stretch ends where the other group runs.
func turns(a, b []int) int {
	n, i, j, last := 0, 0, 0, -1
	for i < len(a) || j < len(b) {
		from := 0
		if j < len(b) && (i == len(a) || b[j] < a[i]) {
			from, j = 1, j+1
		} else {
			i++
		}
		if from != last {
			n++
			last = from
		}
	}
	return n
}

// spreadInTime is the spread of the points in (indices, in time order) about their own
// level as it stands where each was measured: the robust spread of successive points'
// differences, over the square root of two — a step among them is one difference, not a
// spread as wide as the step.
func spreadInTime(in []int, y []float64) float64 {
	d := make([]float64, 0, len(in)-1)
	for k := 1; k < len(in); k++ {
		d = append(d, y[in[k]]-y[in[k-1]])
	}
	return robustSD(d) / math.Sqrt2
}

// nodeMoved is whether a node's points moved from one group to another for good: all of
// one group, then all of another, at least two of each — the levels are that node's
// change (a node that slowed down), not machines that take turns.
func nodeMoved(s []Obs, groups [][]int) bool {
	group := make([]int, len(s))
	for g, in := range groups {
		for _, i := range in {
			group[i] = g
		}
	}
	byNode := map[string][]int{}
	for i, x := range s {
		if x.Node != "" {
			byNode[x.Node] = append(byNode[x.Node], group[i])
		}
	}
	for _, gs := range byNode {
		switches, at := 0, 0
		for k := 1; k < len(gs); k++ {
			if gs[k] != gs[k-1] {
				switches++
				at = k
			}
		}
		if switches == 1 && at >= 2 && len(gs)-at >= 2 {
			return true
		}
	}
	return false
}
