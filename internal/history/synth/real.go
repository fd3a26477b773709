package synth

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/history/changes"
)

// The shapes real histories have and clean synthetic ones lack (issue 56): pools of
// machines of two or three kinds whose levels differ, noise that drifts from night to
// night (AR(1)), and a young series' first night after eight runs. Drawn apart from the
// scenarios before them, so those keep their draw.

// kindNodes are a pool's nodes, two of each kind: a1 and a2 of kind a, and so on.
var kindNodes = [][]string{{"a1", "a2"}, {"b1", "b2"}, {"c1", "c2"}}

// kindNames are what their contexts record each kind as.
var kindNames = []string{"MI300X at 2100 MHz", "MI300X at 1900 MHz", "MI300X at 1500 MHz"}

// poolRun is one run's point in a pool of kinds at levels (multipliers of the base), on
// kind k, with noise sigma.
func poolRun(rng *rand.Rand, base float64, levels []float64, k int, sigma float64) changes.Obs {
	return changes.Obs{V: base * levels[k] * math.Exp(rng.NormFloat64()*sigma), Node: kindNodes[k][rng.IntN(2)], Kind: kindNames[k]}
}

// pick is a kind drawn with the weights w.
func pick(rng *rand.Rand, w []float64) int {
	x := rng.Float64()
	for k, p := range w {
		if x < p {
			return k
		}
		x -= p
	}
	return len(w) - 1
}

// Pools are series measured on a pool of machines of two kinds (one 1.5x slower) or three
// (1.3x and 1.9x), 60 nights at 1.5% noise: a stable mix, a change of mix (nine runs in ten
// on the first kind, then on the second), flips (stretches of 3-5 nights on the slow kind
// alone), and a stable mix with a real 10% step on every kind.
func Pools(seed uint64, count int) []Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x9001))
	var out []Scenario
	for _, levels := range [][]float64{{1, 1.5}, {1, 1.3, 1.9}} {
		kinds := strconv.Itoa(len(levels)) + " kinds"
		even := make([]float64, len(levels))
		for k := range even {
			even[k] = 1 / float64(len(levels))
		}
		for _, shape := range []string{"a stable mix", "a change of mix", "flips of the mix", "a stable mix and a 10% step on every kind"} {
			sc := Scenario{Name: "mixed pool of " + kinds + " (up to " + size(levels[len(levels)-1]) + " apart), " + shape + ", 1.5% noise, 60 runs", Nightly: true, Goal: true}
			for range count {
				base := math.Exp(rng.Float64()*8 - 2)
				s := make([]changes.Obs, 60)
				l := Labelled{Outlier: -1}
				at := 20 + rng.IntN(25)
				var flips [][2]int
				if shape == "flips of the mix" {
					for f := 0; f < 2; f++ {
						from := 12 + f*22 + rng.IntN(10)
						flips = append(flips, [2]int{from, from + 3 + rng.IntN(3)})
					}
				}
				for i := range s {
					k := pick(rng, even)
					switch shape {
					case "a change of mix":
						w := make([]float64, len(levels))
						first, second := 0, len(levels)-1
						if i >= at {
							first, second = second, first
						}
						w[first], w[second] = 0.9, 0.1
						k = pick(rng, w)
					case "flips of the mix":
						k = 0
						if rng.IntN(5) == 0 {
							k = pick(rng, even)
						}
						for _, f := range flips {
							if i >= f[0] && i < f[1] {
								k = len(levels) - 1
							}
						}
					}
					s[i] = poolRun(rng, base, levels, k, 0.015)
				}
				if shape == "a stable mix and a 10% step on every kind" {
					dir := 1.1
					if rng.IntN(2) == 0 {
						dir = 1 / dir
					}
					step(s, at, dir, "")
					l.Steps = []LStep{{at, dir}}
				}
				l.Obs = s
				sc.Series = append(sc.Series, l)
			}
			out = append(out, sc)
		}
	}
	return out
}

// Unrecorded are the pools' shapes where no context recorded the kinds of machine (hosted
// CI runners whose CPU went unrecorded, a store written before opx recorded it): the
// series alone must tell that its levels take turns (changes.Labelled). Drawn apart.
func Unrecorded(seed uint64, count int) []Scenario {
	scs := Pools(seed^0x5eed, count)
	for i := range scs {
		scs[i].Name = strings.Replace(scs[i].Name, "mixed pool of", "mixed pool, no kind recorded, of", 1)
		scs[i].Goal = false
		for j := range scs[i].Series {
			for k := range scs[i].Series[j].Obs {
				scs[i].Series[j].Obs[k].Kind = ""
			}
		}
	}
	return scs
}

// Plain is the pools' baseline: stationary series at the same 1.5% noise on six like
// nodes, 60 nights (what a pool's false gate nights are measured against).
func Plain(seed uint64, count int) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x91a1))
	sc := Scenario{Name: "stationary, 1.5% noise on six like nodes, 60 runs (the pools' baseline)", Nightly: true, Goal: true}
	for range count {
		sc.Series = append(sc.Series, Labelled{Obs: quiet(rng, 60, 0.015), Outlier: -1})
	}
	return sc
}

// AR1 are stationary series whose noise drifts from night to night: an AR(1) process of
// coefficient phi on the log of the metric, its marginal spread 1.5%, 60 nights, no step;
// five times count of them (a rate of 1-5% is measured to a fraction of a percent).
func AR1(seed uint64, count int) []Scenario {
	rng := rand.New(rand.NewPCG(seed, 0xa71))
	var out []Scenario
	for _, phi := range []float64{0.3, 0.6, 0.9} {
		sc := Scenario{Name: "AR(1) noise of coefficient " + strconv.FormatFloat(phi, 'f', 1, 64) + ", 1.5% spread, 60 runs, no step", Nightly: true, Goal: true}
		for range 5 * count {
			s := quiet(rng, 60, 0)
			e := rng.NormFloat64() * 0.015
			for i := range s {
				s[i].V *= math.Exp(e)
				e = phi*e + rng.NormFloat64()*0.015*math.Sqrt(1-phi*phi)
			}
			sc.Series = append(sc.Series, Labelled{Obs: s, Outlier: -1})
		}
		out = append(out, sc)
	}
	return out
}

// FirstNight is a young series' first night: 8 quiet runs at 1% noise, then a 10% step
// (ten spreads), 6 runs after — and the same 14 runs with no step; five times count of
// each (rates of 97% and 0.5% are measured to a fraction of a percent).
func FirstNight(seed uint64, count int) []Scenario {
	rng := rand.New(rand.NewPCG(seed, 0xf1))
	stepped := Scenario{Name: "8 quiet runs, then 10% at 1% noise, 6 runs after", Nightly: true, Goal: true}
	flat := Scenario{Name: "14 quiet runs at 1% noise, no step", Nightly: true, Goal: true}
	for range 5 * count {
		s := quiet(rng, 14, 0.01)
		dir := 1.1
		if rng.IntN(2) == 0 {
			dir = 1 / dir
		}
		step(s, 8, dir, "")
		stepped.Series = append(stepped.Series, Labelled{Obs: s, Steps: []LStep{{8, dir}}, Outlier: -1})
		flat.Series = append(flat.Series, Labelled{Obs: quiet(rng, 14, 0.01), Outlier: -1})
	}
	return []Scenario{stepped, flat}
}
