package changes

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The two tests' null distributions, by simulation. The level test is a rank statistic:
// under a level that never moved (exchangeable noise) its distribution depends only on the
// series' length, whatever the noise's shape, so permutations give it exactly. The newest
// runs' test is a location–scale statistic (a centre against the reference's median, in
// units of its robust spread): under Gaussian noise on the log scale it depends only on the
// reference's length and how many newest runs are taken. scripts/history-calibrate
// simulates both and writes table.go; TestCalibrationTable checks the table against a fresh
// simulation. A test's p-value is read from its table (calibrated), so a series is held to
// the same level whatever its length, and whatever other series a store holds.

// Probs are the probabilities whose quantiles the tables keep.
var Probs = []float64{1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5}

// LevelNs and TailNs are the lengths the tables are simulated at; a length between two is
// read at the one below (the conservative side), one beyond the last at the last.
var (
	LevelNs = gridNs(minPoints)
	TailNs  = gridNs(MinRef)
)

func gridNs(from int) []int {
	var out []int
	for n := from; n <= 64; n++ {
		out = append(out, n)
	}
	return append(out, 80, 96, 128, 192, 256)
}

// A Quantile is a statistic's value at one of Probs and the simulated chance of a value
// as extreme or more (with a discrete statistic's ties: the chance of the value itself
// counted).
type Quantile struct{ Q, P float64 }

// SimulateLevel is the level statistic's upper quantiles at Probs for series of n points,
// from r random permutations.
func SimulateLevel(n, r int, seed uint64) []Quantile { return upperQuantiles(levelStats(n, r, seed)) }

// levelStats are the level statistic of r random permutations of n ranks.
func levelStats(n, r int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	rk := make([]float64, n)
	for i := range rk {
		rk[i] = float64(i + 1)
	}
	stats := make([]float64, r)
	for i := range stats {
		rng.Shuffle(n, func(a, b int) { rk[a], rk[b] = rk[b], rk[a] })
		_, _, _, stats[i] = levelOfRanks(ranked{r: rk})
	}
	return stats
}

// upperQuantiles are the simulated statistics' upper quantiles at Probs, each with the
// share of statistics as high or higher.
func upperQuantiles(s []float64) []Quantile {
	r := len(s)
	slices.Sort(s)
	out := make([]Quantile, len(Probs))
	for j, p := range Probs {
		q := s[min(r-1, r-int(math.Ceil(p*float64(r))))]
		k, _ := slices.BinarySearch(s, q) // values < q
		out[j] = Quantile{q, float64(r-k) / float64(r)}
	}
	return out
}

// SimulateTail is the newest runs' statistic's upper quantiles at Probs, for each k of
// Tails (rows), with a reference of n points, from r Gaussian draws.
func SimulateTail(n, r int, seed uint64) [][]Quantile {
	stats := tailStats(n, r, seed)
	out := make([][]Quantile, len(Tails))
	for t := range Tails {
		out[t] = upperQuantiles(stats[t])
	}
	return out
}

// tailStats are the newest runs' statistic, for each k of Tails (rows), of r Gaussian
// draws of a reference of n points and the runs after it.
func tailStats(n, r int, seed uint64) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(n)^0x51ed))
	kmax := Tails[len(Tails)-1]
	y := make([]float64, n+kmax)
	stats := make([][]float64, len(Tails))
	for i := range stats {
		stats[i] = make([]float64, r)
	}
	for i := range r {
		for j := range y {
			y[j] = rng.NormFloat64()
		}
		for t, k := range Tails {
			stats[t][i], _, _, _ = tailTest(y[:n], y[n:n+k])
		}
	}
	return stats
}

// gridAt is the index in ns of the length n is read at.
func gridAt(ns []int, n int) int {
	i, found := slices.BinarySearch(ns, n)
	if found {
		return i
	}
	return max(0, i-1)
}

// levelP is the calibrated p-value of the level statistic z for a series of n points:
// the chance that a level that never moved gives z or more.
func levelP(z float64, n int) float64 {
	if n < LevelNs[0] {
		return 1
	}
	return upperP(levelTable[gridAt(LevelNs, n)], z)
}

// tailP is the calibrated p-value of the newest k runs' statistic z against a reference
// of n points: the chance that runs at the reference's level give z or more.
func tailP(z float64, n, k int) float64 {
	if n < TailNs[0] {
		return 1
	}
	return upperP(tailTable[gridAt(TailNs, n)][slices.Index(Tails, k)], z)
}

// upperP is the chance of z or more by a table of upper quantiles: at a kept quantile
// its chance (a discrete statistic's ties counted), between two interpolated (log p in
// log z), beyond the first following the last segment's power law.
func upperP(q []Quantile, z float64) float64 {
	j := 0
	for j < len(q) && q[j].Q > z {
		j++
	}
	switch {
	case j == len(q):
		return 1
	case z == q[j].Q:
		return q[j].P
	case j == 0:
		if q[1].Q == q[0].Q {
			return q[0].P
		}
		slope := math.Log(q[1].P/q[0].P) / math.Log(q[1].Q/q[0].Q)
		return q[0].P * math.Pow(z/q[0].Q, slope)
	}
	f := math.Log(z/q[j-1].Q) / math.Log(q[j].Q/q[j-1].Q)
	return math.Min(q[j].P, math.Exp(math.Log(q[j-1].P)+f*math.Log(q[j].P/q[j-1].P)))
}
