package changes

import (
	"math"
	"math/rand/v2"
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
	// judged by its levels, a change of the mix is no change of the series
	mix := series(60, func(i int) float64 {
		if (i < 30) == (i%5 != 0) {
			return 1
		}
		return 1.5
	}, anyNode)
	for _, c := range Detect(mix, Defaults) {
		if c.Mix == "" || !c.Explained {
			t.Errorf("a change of the mix (nine in ten on the fast machines, then on the slow): %+v", c)
		}
	}
}
