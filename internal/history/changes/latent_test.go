package changes

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Labelled names the levels no recorded field explains, and only those: two machines
// taking turns are two levels; a step, a lone excursion, values that tie, a node that
// slowed down for good and a series whose kinds are recorded are not.
func TestLabelledLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 56))
	series := func(n int, level func(i int) float64, node func(i int) string) []Obs {
		s := make([]Obs, n)
		for i := range s {
			s[i] = Obs{V: 20 * level(i) * math.Exp(rng.NormFloat64()*0.015), Node: node(i)}
		}
		return s
	}
	anyNode := func(i int) string { return string(rune('a' + rng.IntN(6))) }
	kinds := func(s []Obs) map[string]int {
		out := map[string]int{}
		for _, x := range Labelled(s, Defaults) {
			out[x.Kind]++
		}
		return out
	}
	turns := series(40, func(i int) float64 { return []float64{1, 1.5}[(i/3)%2] }, anyNode)
	if k := kinds(turns); k["unrecorded level 1"] != 21 || k["unrecorded level 2"] != 19 {
		t.Errorf("two machines taking turns every three nights: %v", k)
	}
	three := series(60, func(i int) float64 { return []float64{1, 1.3, 1.9}[i%3] }, anyNode)
	if k := kinds(three); k["unrecorded level 1"] != 20 || k["unrecorded level 2"] != 20 || k["unrecorded level 3"] != 20 {
		t.Errorf("three machines by turns: %v", k)
	}
	// two stretches of a few nights at one level, apart (the flips a pool's mix makes):
	// the second is a level the series knows, not a second pair of opposite changes
	flips := series(40, func(i int) float64 {
		return map[bool]float64{false: 1, true: 1.5}[i >= 10 && i < 14 || i >= 30 && i < 34]
	}, anyNode)
	if k := kinds(flips); k["unrecorded level 2"] != 8 {
		t.Errorf("two excursions to one level: %v", k)
	}
	for name, s := range map[string][]Obs{
		"a 50% step":             series(40, func(i int) float64 { return map[bool]float64{false: 1, true: 1.5}[i >= 20] }, anyNode),
		"a lone excursion":       series(40, func(i int) float64 { return map[bool]float64{false: 1, true: 1.5}[i >= 15 && i < 22] }, anyNode),
		"a step, two runs back":  series(60, func(i int) float64 { return map[bool]float64{false: 1, true: 0.8}[i >= 21 && i != 45 && i != 47] }, anyNode),
		"a node slowed for good": series(60, func(i int) float64 { return map[bool]float64{false: 1, true: 1.5}[i >= 30 && i%2 == 1] }, func(i int) string { return string(rune('a' + i%2)) }),
	} {
		if k := kinds(s); len(k) != 1 || k[""] != len(s) {
			t.Errorf("%s: labelled %v", name, k)
		}
	}
	ties := make([]Obs, 50)
	for i := range ties {
		ties[i] = Obs{V: math.Round(22.5*math.Exp(rng.NormFloat64()*0.025)/5) * 5} // 20 and 25 µs by turns
	}
	if k := kinds(ties); len(k) != 1 {
		t.Errorf("values that tie: labelled %v", k)
	}
	recorded := series(40, func(i int) float64 { return []float64{1, 1.5}[(i/3)%2] }, anyNode)
	for i := range recorded {
		recorded[i].Kind = []string{"MI300X at 2100 MHz", "MI300X at 1500 MHz"}[(i/3)%2]
	}
	for _, x := range Labelled(recorded, Defaults) {
		if strings.HasPrefix(x.Kind, "unrecorded") {
			t.Fatalf("a series whose kinds are recorded: labelled %q", x.Kind)
		}
	}
	// one kind recorded throughout explains no level: the levels are told apart within it
	one := append([]Obs(nil), turns...)
	for i := range one {
		one[i].Kind = "NVIDIA H200"
	}
	if k := kinds(one); k["NVIDIA H200, unrecorded level 1"] != 21 || k["NVIDIA H200, unrecorded level 2"] != 19 {
		t.Errorf("one kind recorded throughout: %v", k)
	}
	// judged by its levels, a change of the mix (one night in five on the slow machines,
	// then four in five; each night on any of six nodes) is no change of the series, where
	// judged as one level it is: over 20 draws, every one labelled, none with a change
	// that is not the machines', and the same series unlabelled read a change in most
	unlabelledChanged := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 56))
		mix := make([]Obs, 60)
		for i := range mix {
			l := 1.5
			if (i < 30) == (i%5 != 0) {
				l = 1
			}
			mix[i] = Obs{V: 20 * l * math.Exp(rng.NormFloat64()*0.015), Node: string(rune('a' + rng.IntN(6)))}
		}
		if k := kinds(mix); len(k) != 2 {
			t.Errorf("a change of the mix, draw %d: labelled %v", seed, k)
		}
		for _, c := range Detect(mix, Defaults) {
			if c.Mix == "" || !c.Explained {
				t.Errorf("a change of the mix, draw %d: %+v", seed, c)
			}
		}
		if len(drifting(mix, logsOf(mix), Defaults)) > 0 { // as one level
			unlabelledChanged++
		}
	}
	if unlabelledChanged < 10 {
		t.Errorf("judged as one level, %d of 20 changes of the mix read a change: the test shows nothing", unlabelledChanged)
	}
}

// A level is known before the runs it judges: a lasting regression onto the level of a few
// earlier lone slow nights (a noisy neighbour's), a regression that relands where it was
// twice reverted, and a change that makes the runs bimodal are each still found — the
// first-night gate fails within five nights of it, and the series' changes hold it at the
// end. (An adversarial review found the first two hidden for good, and the third gating
// on its first two nights only, before the newest stretch was set aside and a level had
// to run in the older half of the series.)
func TestLatentLevelsHideNoRegression(t *testing.T) {
	caught := func(s []Obs, at int) bool {
		for n := at + 1; n <= min(len(s), at+5); n++ {
			for _, j := range AtNewest(s[:n], Defaults) {
				if j.Fails(5, true, true) {
					return true
				}
			}
		}
		return false
	}
	held := func(s []Obs) bool {
		for _, j := range AtNewest(s, Defaults) {
			if j.Fails(5, true, false) {
				return true
			}
		}
		return false
	}
	for _, k := range []int{2, 3, 4} {
		for _, r := range []float64{1.1, 1.3} {
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, uint64(k)))
				slow := map[int]bool{}
				for len(slow) < k {
					slow[5+rng.IntN(40)] = true
				}
				s := make([]Obs, 60)
				for i := range s {
					v := 1.0
					if i >= 50 || slow[i] {
						v = r
					}
					s[i] = Obs{V: 20 * v * math.Exp(rng.NormFloat64()*0.01)}
				}
				if !caught(s, 50) || !held(s) {
					t.Errorf("%d lone nights at %.1fx, then a lasting %.1fx regression (draw %d): caught %v, held at the end %v", k, r, r, seed, caught(s, 50), held(s))
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(11, 11))
	reland := make([]Obs, 60)
	for i := range reland {
		v := 1.0
		if i >= 15 && i < 20 || i >= 30 && i < 35 || i >= 50 {
			v = 1.2
		}
		reland[i] = Obs{V: 20 * v * math.Exp(rng.NormFloat64()*0.01)}
	}
	if !held(reland) || !slices.ContainsFunc(Detect(reland, Defaults), func(c Change) bool { return c.At == 50 && c.Mix == "" }) {
		t.Errorf("a regression relanded for good at 50: held %v, changes %+v", held(reland), Detect(reland, Defaults))
	}
	bimodal := make([]Obs, 60)
	for i := range bimodal {
		v := 1.0
		if i >= 35 && i%2 == 1 {
			v = 1.3
		}
		bimodal[i] = Obs{V: 20 * v * math.Exp(rng.NormFloat64()*0.01)}
	}
	if k := Labelled(bimodal, Defaults); slices.ContainsFunc(k, func(x Obs) bool { return x.Kind != "" }) {
		t.Errorf("a change that made the runs bimodal at 35 is labelled a level")
	}
}

// Series of other shapes than the detector's own are returned as they are: none, one run,
// too few to take turns, all one value, a single enormous outlier among quiet runs.
func TestLabelledOddShapes(t *testing.T) {
	flat := make([]Obs, 30)
	for i := range flat {
		flat[i] = Obs{V: 20}
	}
	outlier := make([]Obs, 30)
	for i := range outlier {
		outlier[i] = Obs{V: 20 * (1 + 0.01*float64(i%3))}
	}
	outlier[15].V = 2e9
	for name, s := range map[string][]Obs{
		"none": nil, "one run": {{V: 20}}, "six runs by turns": {{V: 1}, {V: 2}, {V: 1}, {V: 2}, {V: 1}, {V: 2}},
		"one value": flat, "an outlier of 1e8x": outlier,
	} {
		got := Labelled(s, Defaults)
		if len(got) != len(s) || slices.ContainsFunc(got, func(x Obs) bool { return x.Kind != "" }) {
			t.Errorf("%s: labelled %+v", name, got)
		}
	}
}
