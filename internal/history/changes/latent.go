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
//
// A level is known before the runs it judges (levels): its runs before the newest stretch
// count, so two lone slow nights and a lasting regression onto their level are no level;
// a level that appeared only lately (a change that made the runs bimodal) is none; and a
// newest stay on a level longer than the series' mix explains is left unlabelled, judged
// as any change — a regression onto a level the series visited a few nights apart fails
// the gate within a few nights (TestLatentLevelsHideNoRegression).

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

// stayAlpha is how unlikely by the series' mix a newest stay on one level must be for its
// runs to be judged as any change, not by that level (levels).
const stayAlpha = 0.001

// stayRuns is how many runs before the newest stay tell the mix it is judged by: the
// recent mix, so a change of the mix some weeks ago is the mix now.
const stayRuns = 20

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
	groups, until := levels(y, o)
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
			if i >= until {
				out[i].Kind = "" // judged as any change: no kind, not the one recorded (a kind new to the series is not judged)
			}
		}
	}
	return out
}

// levels are the points' groups (indices, each in time order, the lowest level first)
// when the series is multimodal: the widest gaps between the points' sorted levels that
// leave minLatentRuns on each side cut them into three groups, else two, when every gap
// clears latentGap of its two groups' spreads (spreadInTime) and twice MinChange, every
// two adjacent groups took minTurns turns, and, the newest stretch (the newest point's
// group's newest points in a row) set aside, every group ran minLatentRuns times in each
// half of the runs before it (inBothHalves): a level is known before the runs it judges
// (two lone slow nights and a regression to their level are no level), and a level that
// appeared only lately (a change that made the runs bimodal) is none. until is where the
// labels end: the newest stretch is left unlabelled, judged as any change, when a stay so
// long on its level is unlikely by the mix just before it (its group's share of the
// stayRuns runs before, to the power of the stay's length, below stayAlpha): the mix or
// the code moved, and a series cannot tell which. nil when no cut does.
func levels(y []float64, o Options) (groups [][]int, until int) {
	n := len(y)
	byLevel := make([]int, n)
	for i := range byLevel {
		byLevel[i] = i
	}
	slices.SortFunc(byLevel, func(i, j int) int { return cmp.Compare(y[i], y[j]) })
	var cuts []int // the gaps, widest first
	for c := minLatentRuns; c <= n-minLatentRuns; c++ {
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
		groups = make([][]int, k)
		group := make([]int, n)
		from := 0
		for g := range k {
			to := n
			if g < k-1 {
				to = chosen[g]
			}
			groups[g] = slices.Clone(byLevel[from:to])
			slices.Sort(groups[g])
			for _, i := range groups[g] {
				group[i] = g
			}
			from = to
		}
		last := n - 1 // the newest stretch: [last, n)
		for last > 0 && group[last-1] == group[n-1] {
			last--
		}
		ok := inBothHalves(group, k, last)
		for g := 1; g < k && ok; g++ {
			d := gap(chosen[g-1])
			ok = d >= 2*o.MinChange && d >= latentGap*math.Max(spreadInTime(groups[g-1], y), spreadInTime(groups[g], y)) &&
				turns(groups[g-1], groups[g]) >= minTurns
		}
		if !ok {
			continue
		}
		// the newest stretch, by the mix just before it: its group ran a share p of the
		// stayRuns runs before it (one more each way: a level absent from them is not
		// impossible), and a stay of n-last runs there in a row happens by that mix with
		// chance p^(n-last)
		ran := 0
		for i := max(0, last-stayRuns); i < last; i++ {
			if group[i] == group[n-1] {
				ran++
			}
		}
		p := float64(ran+1) / float64(min(last, stayRuns)+2)
		if float64(n-last)*math.Log(p) < math.Log(stayAlpha) {
			return groups, last
		}
		return groups, n
	}
	return nil, 0
}

// inBothHalves is whether every group ran minLatentRuns times in each half of the runs before
// the newest stretch (group: each point's group; [0, last)): machines taking turns run
// throughout. A step with a run or two back at the old level after it (outliers, a flaky
// fast night) is two blocks, not machines: its old level ran in one half alone.
func inBothHalves(group []int, k, last int) bool {
	for g := range k {
		first, second := 0, 0
		for i, x := range group[:last] {
			if x != g {
				continue
			}
			if i < last/2 {
				first++
			} else {
				second++
			}
		}
		if first < minLatentRuns || second < minLatentRuns {
			return false
		}
	}
	return true
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

// nodeMoved is whether the levels are one node's change: a node whose points moved from
// one group to another for good (all of one, then all of another, at least two of each)
// and make most (four in five) of the group it moved to — a node that slowed down, not
// machines that take turns (in a change of a pool's mix, any node may happen to run only
// fast before and only slow after; the slow group is then many nodes' points).
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
		if switches == 1 && at >= 2 && len(gs)-at >= 2 && 5*(len(gs)-at) >= 4*len(groups[gs[len(gs)-1]]) {
			return true
		}
	}
	return false
}
