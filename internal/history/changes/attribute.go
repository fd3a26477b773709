// Which nodes a change is confined to: each node's runs after it against its own level
// before, compared with the rest's (Mann-Whitney, Holm-corrected).

package changes

import (
	"math"
	"slices"
	"sort"
)

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
	s = onOneLevel(Labelled(s, o), o) // each kind of machine on its own level, as the change was found
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
	r := ranks(append(slices.Clone(a), b...)).r
	na, nb := float64(len(a)), float64(len(b))
	sum := 0.0
	for i := range a {
		sum += r[i]
	}
	u := sum - na*(na+1)/2
	z := (u - na*nb/2) / math.Sqrt(na*nb*(na+nb+1)/12)
	return math.Erfc(math.Abs(z) / math.Sqrt2)
}
