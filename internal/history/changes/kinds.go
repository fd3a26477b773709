package changes

import (
	"math"
	"slices"
	"strings"
)

// Kinds: a series measured on a pool of machines that differ (CPU models, GPU SKUs,
// clocks, power limits) alternates between their levels from run to run, and a change of
// the mix would read as a shift of the whole series though no code moved. Each machine's
// (or machine kind's) points are judged against its own level instead: its offset from the
// rest, measured against the other machines' points of the same nights, is taken out
// before the tests, so the series is on one level — the most frequent machine's. A
// machine's offset is only taken out when it is interleaved with the others (they ran
// between its first and last nights: a machine that replaced all the others at one night
// is a change, not a level of its own), the same in the first and
// second half of its points (a machine whose level moved is a change of that machine),
// at least MinChange and clear of its own noise.

// minKindRuns is the fewest points a machine (or kind) needs for a level of its own.
const minKindRuns = 5

// kindWindow is how many nights each way a point is set against the other machines'.
const kindWindow = 8

// A Kind is one machine's (or kind's) level in a series that its points are judged by.
type Kind struct {
	Key string // the kind of machine its context recorded (Obs.Kind)
	// Ratio is its level over the series' (the most frequent machine's): 1.7 is 1.7x
	// the metric of the rest.
	Ratio float64
	Runs  int // its points in the series
}

// keysOf are the levels the points are judged by: the kind of machine its context
// recorded (Obs.Kind), when the series holds minKindRuns points of it; else none ("").
// Nodes alone are not levels: a node's level, of a handful of points, is too noisy to take
// out (tried: it cost steps on six like nodes their first nights).
func keysOf(s []Obs) []string {
	count := map[string]int{}
	for _, x := range s {
		count[x.Kind]++
	}
	keys := make([]string, len(s))
	for i, x := range s {
		if x.Kind != "" && count[x.Kind] >= minKindRuns {
			keys[i] = x.Kind
		}
	}
	return keys
}

// Kinds are the levels of the series' machines that its points are judged by, when they
// differ (see above), the most frequent first (its Ratio 1: the level the others are
// measured against), then by how often they ran; nil when they do not differ.
func Kinds(s []Obs, o Options) []Kind {
	s = Labelled(s, o)
	keys := keysOf(s)
	off, top := offsets(logsOf(s), keys, o)
	if off == nil {
		return nil
	}
	runs := map[string]int{}
	for _, k := range keys {
		runs[k]++
	}
	out := []Kind{{Key: top, Ratio: 1, Runs: runs[top]}}
	for k, v := range off {
		out = append(out, Kind{Key: k, Ratio: math.Exp(v), Runs: runs[k]})
	}
	slices.SortFunc(out[1:], func(a, b Kind) int {
		if a.Runs != b.Runs {
			return b.Runs - a.Runs
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// offsets are the machines' levels (log) off the most frequent one's, for those whose
// level is their own (see above); nil when none is.
func offsets(y []float64, keys []string, o Options) (off map[string]float64, top string) {
	count := map[string]int{}
	for _, k := range keys {
		if k != "" {
			count[k]++
		}
	}
	if len(count) < 2 {
		return nil, ""
	}
	var ordered []string
	for k := range count {
		ordered = append(ordered, k)
	}
	slices.Sort(ordered)
	top = ordered[0] // the most frequent machine: the level the others are put on
	for _, k := range ordered {
		if count[k] > count[top] {
			top = k
		}
	}
	// a first guess, each machine's median off the most frequent one's, that the rounds
	// below set right locally (a level that moved shifts medians, not the nights around it)
	byKey := map[string][]float64{}
	for i, k := range keys {
		byKey[k] = append(byKey[k], y[i])
	}
	off = map[string]float64{}
	for _, k := range ordered {
		off[k] = median(byKey[k]) - median(byKey[top])
	}
	adj := func(j int) float64 { return y[j] - off[keys[j]] }
	for range 3 { // each machine against the others as they stand, a few times round
		for _, k := range ordered {
			if k == top {
				continue
			}
			var d []float64
			var paired []int
			for i := range y {
				if keys[i] != k {
					continue
				}
				var around []float64
				for j := max(0, i-kindWindow); j <= min(len(y)-1, i+kindWindow); j++ {
					if keys[j] != k {
						around = append(around, adj(j))
					}
				}
				for _, a := range around {
					d = append(d, y[i]-a)
				}
				if len(around) > 0 {
					paired = append(paired, i)
				}
			}
			delete(off, k)
			if len(paired) < minKindRuns || !interleaved(keys, k, paired[0], paired[len(paired)-1]) {
				continue // met the others around one night only: it replaced them, a change
			}
			m := median(d)
			h := len(d) / 2
			first, second := median(d[:h]), median(d[h:])
			noise := robustSD(d)
			n := float64(len(paired)) // pairs share their points: as many as k's points say
			if math.Abs(m) < o.MinChange || math.Abs(m) < 4*noise/math.Sqrt(n) ||
				math.Abs(first-second) > math.Max(math.Abs(m)/2, 4*noise/math.Sqrt(n/2)) {
				continue
			}
			off[k] = m
		}
	}
	delete(off, top)
	if len(off) == 0 {
		return nil, ""
	}
	return off, top
}

// interleaved is whether another machine than k ran at least once between k's points
// first and last (the nights k was set against them): k ran beside them, and did not
// replace them at one night.
func interleaved(keys []string, k string, first, last int) bool {
	others := 0
	for j := first + 1; j < last; j++ {
		if keys[j] != k {
			others++
		}
	}
	return others >= 1
}

// Levelled is the series with each kind of machine's points on the level of its most
// frequent kind, as the detector judges it (the series itself when its kinds do not
// differ): the levels a change is said between. KindRatio is a kind's level over that one
// (1 for a kind with none of its own), to set a lone value of that kind on it.
func Levelled(s []Obs, o Options) []Obs { return onOneLevel(Labelled(s, o), o) }

// KindRatio is the kind's level over the series' most frequent kind's (Kinds), 1 when it
// has no level of its own.
func KindRatio(s []Obs, kind string, o Options) float64 {
	for _, k := range Kinds(s, o) {
		if k.Key == kind {
			return k.Ratio
		}
	}
	return 1
}

// onOneLevel is the series with each machine's points on the series' level (offsets):
// the series itself when its machines do not differ.
func onOneLevel(s []Obs, o Options) []Obs {
	keys := keysOf(s)
	off, _ := offsets(logsOf(s), keys, o)
	if off == nil {
		return s
	}
	out := slices.Clone(s)
	for i := range out {
		if v, ok := off[keys[i]]; ok {
			f := math.Exp(-v)
			out[i].V *= f
			out[i].Lo *= f
			out[i].Hi *= f
		}
	}
	return out
}

// ofItsKind is whether the newest runs tl lie at a level their own kind of machine
// already had, in a series that runs on a pool: the runs of the level before them (pre,
// logs y — since the last shift, never a level before it) are on two or more recorded kinds
// (Obs.Kind), the newest runs all on one, and that kind's runs among pre lie as far off the
// reference's (med) as the newest runs' centre c does, on the same side, within 4 standard
// errors of c (the spread of each kind's points about its own level; never below twice
// MinChange). A kind the pool's level never ran on has no level yet, and is not judged
// against the others'. A series that ran on one kind is judged as any other: a new kind
// there (new hardware, or a kind said in other words by a newer opx) is set against the
// level before it. A kind too rarely run for a level of its own (offsets) is so still judged
// by the level it had: a night on the slow kind of a pool is no change.
func ofItsKind(pre []Obs, y []float64, tl []Obs, med, c float64, o Options) bool {
	k := tl[0].Kind
	if k == "" {
		return false
	}
	for _, x := range tl[1:] {
		if x.Kind != k {
			return false
		}
	}
	by := map[string][]float64{}
	for i, x := range pre {
		by[x.Kind] = append(by[x.Kind], y[i])
	}
	kinds := 0
	for key := range by {
		if key != "" {
			kinds++
		}
	}
	if kinds < 2 {
		return false // not a pool: judged as any other series
	}
	own := by[k]
	if len(own) == 0 {
		return true // a kind the pool's level never ran on: no level of its own yet
	}
	lvl := median(own)
	if (lvl-med)*(c-med) <= 0 || math.Abs(lvl-med) < math.Abs(c-med)/2 {
		return false
	}
	var dev []float64
	for key, v := range by {
		if key == "" || len(v) < 2 {
			continue
		}
		m := median(v)
		for _, x := range v {
			dev = append(dev, x-m)
		}
	}
	return math.Abs(c-lvl) <= math.Max(2*o.MinChange, 4*robustSD(dev)*math.Sqrt(1+1/float64(len(own))))
}

// markMixes sets Mix on the pooled changes (found, oldest first, of series s) where the
// kinds of machine changed with the level: every run of the old level (since the change
// before) and of the new (until the change after) on a recorded kind, and no kind on both
// sides; Explained where each new kind's own earlier runs (before the old level, set
// against the other kinds' runs around them) put it where the new level is, NewKind where
// one of them has no such run.
func markMixes(s []Obs, found []Change, o Options) {
	var pooled []int
	for i, c := range found {
		if c.Node == "" {
			pooled = append(pooled, i)
		}
	}
	for j, i := range pooled {
		from, to := 0, len(s)
		if j > 0 {
			from = found[pooled[j-1]].At
		}
		if j+1 < len(pooled) {
			to = found[pooled[j+1]].At
		}
		before, okB := kindsIn(s[from:found[i].At])
		after, okA := kindsIn(s[found[i].At:to])
		if !okB || !okA || slices.ContainsFunc(before, func(k string) bool { return slices.Contains(after, k) }) {
			continue
		}
		found[i].Mix = strings.Join(before, ", ") + " → " + strings.Join(after, ", ")
		var own float64
		found[i].Explained, found[i].NewKind, own, found[i].Rebased = explained(s, from, found[i].At, to, after, o)
		if found[i].Rebased { // back on a kind that ran alone, off its level then: measured from it
			found[i].Ratio = math.Exp(found[i].Level - own)
		}
	}
}

// explained is whether the kinds after (on which runs [at, to) ran) sit where their own
// earlier runs said they would: each kind's runs before from, each set against the other
// kinds' runs within kindWindow of it, give its offset from the others; the level of
// [from, at) plus that offset must be the kind's level in [at, to), within twice MinChange
// or 4 of the old level's spreads. A kind whose earlier runs met no other kind (the series
// ran on it alone, then moved away and back) is set against its own level then, within
// twice MinChange or 4 of its spreads: the move back tells whether the code moved, and
// the change is then measured from that level (own, its log; rebase). A kind
// with no earlier run has no known level (unknown): the machine, or the code, may have
// moved, and the series cannot tell.
func explained(s []Obs, from, at, to int, after []string, o Options) (ok, unknown bool, own float64, rebase bool) {
	y := logsOf(s)
	old := median(y[from:at])
	tol := math.Max(2*o.MinChange, 4*robustSD(y[from:at]))
	for _, k := range after {
		var d, own, now []float64
		for i := range from {
			if s[i].Kind != k {
				continue
			}
			own = append(own, y[i])
			var around []float64
			for j := max(0, i-kindWindow); j <= min(from-1, i+kindWindow); j++ {
				if s[j].Kind != k && s[j].Kind != "" {
					around = append(around, y[j])
				}
			}
			if len(around) > 0 {
				d = append(d, y[i]-median(around))
			}
		}
		for i := at; i < to; i++ {
			if s[i].Kind == k {
				now = append(now, y[i])
			}
		}
		switch {
		case len(own) == 0 || len(now) == 0:
			unknown = true // a kind new to the series
		case len(d) > 0 && math.Abs(median(now)-(old+median(d))) > tol:
			return false, false, 0, false // a known kind off its level: the code moved too
		case len(d) == 0 && math.Abs(median(now)-median(own)) > math.Max(2*o.MinChange, 4*robustSD(own)):
			if len(after) > 1 {
				return false, false, 0, false
			}
			return false, false, median(own), true // back on a kind that ran alone before, off its own level then
		}
	}
	return !unknown, unknown, 0, false
}

// kindsIn are the recorded kinds of the runs, sorted; false when one has none.
func kindsIn(s []Obs) ([]string, bool) {
	var out []string
	for _, x := range s {
		if x.Kind == "" {
			return nil, false
		}
		if !slices.Contains(out, x.Kind) {
			out = append(out, x.Kind)
		}
	}
	slices.Sort(out)
	return out, len(out) > 0
}
