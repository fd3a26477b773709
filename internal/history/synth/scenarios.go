package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/semianalysis/opx/internal/history/changes"
)

// A Labelled series is one of a scenario's: its points and the steps in it (each the
// index of its first run and its size as a ratio), and the node a step is confined to
// ("" for every node).
type Labelled struct {
	Obs   []changes.Obs
	Steps []LStep
	Node  string
	// Outlier is the index of an isolated outlier (-1 when none).
	Outlier int
}

// LStep is one known step.
type LStep struct {
	At    int
	Ratio float64
}

// A Scenario is a family of labelled series, and whether the gate is judged night by
// night (every prefix, as a nightly check meets it) or once, at the end.
type Scenario struct {
	Name    string
	Nightly bool
	// Goal marks the scenarios the goals are stated for.
	Goal   bool
	Series []Labelled
}

var sixNodes = []string{"n1", "n2", "n3", "n4", "n5", "n6"}

// quiet is n runs at a random level with lognormal noise sigma, on six nodes at random.
func quiet(rng *rand.Rand, n int, sigma float64) []changes.Obs {
	base := math.Exp(rng.Float64()*8 - 2)
	out := make([]changes.Obs, n)
	for i := range out {
		out[i] = changes.Obs{V: base * math.Exp(rng.NormFloat64()*sigma), Node: sixNodes[rng.IntN(6)]}
	}
	return out
}

// step multiplies the points from at on (of node, when not "") by r.
func step(s []changes.Obs, at int, r float64, node string) {
	for i := at; i < len(s); i++ {
		if node == "" || s[i].Node == node {
			s[i].V *= r
		}
	}
}

// Scenarios are the shapes docs/history.md's per-scenario table is measured on; seed
// draws them, count scales how many series each holds.
func Scenarios(seed uint64, count int) []Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []Scenario
	for _, young := range []bool{true, false} {
		for _, noise := range []float64{0.01, 0.02} {
			for _, r := range []float64{1.10, 1.20, 3} {
				sc := Scenario{Name: "young store: " + span(young) + " quiet runs, then " + size(r) + " at " + pct(noise) + " noise, 6 runs after", Nightly: true, Goal: !young && r <= 1.2}
				for range count {
					before := 3 + rng.IntN(3)
					if !young {
						before = 6 + rng.IntN(7)
					}
					s := quiet(rng, before+6, noise)
					dir := r
					if rng.IntN(2) == 0 {
						dir = 1 / r
					}
					step(s, before, dir, "")
					sc.Series = append(sc.Series, Labelled{Obs: s, Steps: []LStep{{before, dir}}, Outlier: -1})
				}
				out = append(out, sc)
			}
		}
	}
	for _, noise := range []float64{0.01, 0.02} {
		sc := Scenario{Name: "three 15% steps in 60 runs, alternating directions, " + pct(noise) + " noise", Goal: true}
		for range count {
			s := quiet(rng, 60, noise)
			var steps []LStep
			dir := 1.15
			if rng.IntN(2) == 0 {
				dir = 1 / dir
			}
			for k, at := range []int{15, 30, 45} {
				at += rng.IntN(5) - 2
				r := dir
				if k == 1 {
					r = 1 / dir
				}
				step(s, at, r, "")
				steps = append(steps, LStep{at, r})
			}
			sc.Series = append(sc.Series, Labelled{Obs: s, Steps: steps, Outlier: -1})
		}
		out = append(out, sc)
	}
	for _, outlier := range []float64{1.5, 5, 20} {
		sc := Scenario{Name: "an isolated " + size(outlier) + " outlier, then a lasting 10% step at 1-2% noise", Nightly: true, Goal: true}
		for range count {
			noise := 0.01 + 0.01*float64(rng.IntN(2))
			at := 14 + rng.IntN(8)
			s := quiet(rng, at+8, noise)
			o := at - 1 - rng.IntN(6)
			s[o].V *= outlier
			step(s, at, 1.1, "")
			sc.Series = append(sc.Series, Labelled{Obs: s, Steps: []LStep{{at, 1.1}}, Outlier: o})
		}
		out = append(out, sc)
	}
	global := Scenario{Name: "a 10% step on all six nodes at 2% noise (60 runs)", Goal: true}
	ofTwo := Scenario{Name: "one node of two 20% slower at 1% noise (60 runs)"}
	ofSix := Scenario{Name: "one node of six 20% slower at 1% noise (60 runs)"}
	for range count {
		s := quiet(rng, 60, 0.02)
		at := 20 + rng.IntN(25)
		step(s, at, 1.1, "")
		global.Series = append(global.Series, Labelled{Obs: s, Steps: []LStep{{at, 1.1}}, Outlier: -1})
		s = quiet(rng, 60, 0.01)
		for i := range s {
			s[i].Node = sixNodes[rng.IntN(2)]
		}
		node := sixNodes[rng.IntN(2)]
		step(s, at, 1.2, node)
		ofTwo.Series = append(ofTwo.Series, Labelled{Obs: s, Steps: []LStep{{at, 1.2}}, Node: node, Outlier: -1})
		s = quiet(rng, 60, 0.01)
		node = sixNodes[rng.IntN(6)]
		step(s, at, 1.2, node)
		ofSix.Series = append(ofSix.Series, Labelled{Obs: s, Steps: []LStep{{at, 1.2}}, Node: node, Outlier: -1})
	}
	out = append(out, global, ofTwo, ofSix)
	out = append(out, coarse(seed, count)...) // each drawn apart: the rows above keep their draw
	out = append(out, FirstNight(seed, count)...)
	out = append(out, Plain(seed, count))
	out = append(out, Pools(seed, count)...)
	out = append(out, AR1(seed, count)...)
	out = append(out, SmallSteps(seed, count))
	return append(out, Unrecorded(seed, count)...)
}

// SmallSteps are series with two small steps, the second on the first: 2%, then 3% more
// 20-32 runs later, at 1% noise over 60 runs — a drift model that takes the first step
// for drift loses the second (drift.go's phi: the halfway rule tried found the second in
// 274 of 400 series, the lesser of the two estimates in 319).
func SmallSteps(seed uint64, count int) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5357))
	sc := Scenario{Name: "a 2% step, then 3% more 20-32 runs later, at 1% noise (60 runs)"}
	for range count {
		s := quiet(rng, 60, 0.01)
		first := 10 + rng.IntN(8)
		second := first + 20 + rng.IntN(13)
		step(s, first, 1.02, "")
		step(s, second, 1.03, "")
		sc.Series = append(sc.Series, Labelled{Obs: s, Steps: []LStep{{first, 1.02}, {second, 1.03}}, Outlier: -1})
	}
	return sc
}

// coarse are series of a ~20 µs kernel at 2.5% noise recorded at a coarse resolution — 1,
// 2 or 5 µs, so its values tie (19, 20, 21 at 1 µs) — over 50 nights: stationary (the gate
// must not fail on a value one quantum off), and with a lasting 30% step (still found).
func coarse(seed uint64, count int) []Scenario {
	rng := rand.New(rand.NewPCG(seed, 0xc0a5e))
	var out []Scenario
	for _, stepped := range []bool{false, true} {
		for _, q := range []float64{1, 2, 5} {
			name := "a ~20 µs kernel recorded at " + strconv.Itoa(int(q)) + " µs (values tie), 2.5% noise, 50 runs"
			if stepped {
				name += ", a 30% step"
			}
			sc := Scenario{Name: name, Nightly: true, Goal: true}
			for range count {
				level := 15 + 10*rng.Float64()
				s := make([]changes.Obs, 50)
				at := 25 + rng.IntN(15)
				for i := range s {
					v := level * math.Exp(rng.NormFloat64()*0.025)
					if stepped && i >= at {
						v *= 1.3
					}
					s[i] = changes.Obs{V: math.Max(q, math.Round(v/q)*q), Node: sixNodes[rng.IntN(6)]}
				}
				l := Labelled{Obs: s, Outlier: -1}
				if stepped {
					l.Steps = []LStep{{at, 1.3}}
				}
				sc.Series = append(sc.Series, l)
			}
			out = append(out, sc)
		}
	}
	return out
}

// AAStore is a store of n stationary series of runs runs at 1-3% noise.
func AAStore(seed uint64, n, runs int) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0xaa))
	sc := Scenario{Name: "A/A: a store of " + strconv.Itoa(n) + " stationary series, " + strconv.Itoa(runs) + " runs, 1-3% noise", Goal: true}
	for range n {
		sc.Series = append(sc.Series, Labelled{Obs: quiet(rng, runs, 0.01*float64(1+rng.IntN(3))), Outlier: -1})
	}
	return sc
}

// Tally is a scenario's figures.
type Tally struct {
	Series, Steps int
	// Found are the steps a change matches at the end (first run within 2, same
	// direction); Dated those matched at their first run exactly.
	Found, Dated int
	// Slower are the steps that slow the series down (the gate's business); FirstNight
	// those the gate failed on at their first run (nightly scenarios: the check as of
	// that run, the change dated there), ByThird those it failed on by their third.
	Slower, FirstNight, ByThird int
	// Calls are the changes called at the end, Wrong those matching no step; Machine
	// those matching none that are said as a change of machine the series can lay on no
	// code (changes.Change.Mix, Explained or NewKind: a pool's move onto another kind),
	// which are what happened, not a false change.
	Calls, Wrong, Machine int
	// FalseSeries are the series with a wrong call; FalseGate the nights the gate failed
	// on no step (a slower change new that night matching none), OutlierNights those
	// where what it failed on was the outlier at the newest run (a suspect by design: one
	// run cannot tell an outlier from a step; the confirmation run settles it).
	FalseSeries, FalseGate, OutlierNights, Nights int
	// Named are the changes (matching a step) whose nodes were judged; NamedWrong those
	// naming other nodes than the step's (any, for a step on every node).
	Named, NamedWrong int
}

// Measure judges a scenario as opx history check does (changes.AtNewest, the gate at
// 5%, changes.Attribute), with the detector's defaults.
func Measure(sc Scenario, o changes.Options) Tally {
	var t Tally
	for _, l := range sc.Series {
		t.add(measureOne(sc, l, o))
	}
	return t
}

func (t *Tally) add(o Tally) {
	t.Series += o.Series
	t.Steps += o.Steps
	t.Found += o.Found
	t.Dated += o.Dated
	t.Slower += o.Slower
	t.FirstNight += o.FirstNight
	t.ByThird += o.ByThird
	t.Calls += o.Calls
	t.Wrong += o.Wrong
	t.Machine += o.Machine
	t.FalseSeries += o.FalseSeries
	t.FalseGate += o.FalseGate
	t.OutlierNights += o.OutlierNights
	t.Nights += o.Nights
	t.Named += o.Named
	t.NamedWrong += o.NamedWrong
}

// Add is two tallies together.
func (t Tally) Add(o Tally) Tally { t.add(o); return t }

func measureOne(sc Scenario, l Labelled, o changes.Options) Tally {
	t := Tally{Series: 1, Steps: len(l.Steps)}
	match := func(c changes.Change, st LStep, tol int) bool {
		return abs(c.At-st.At) <= tol && (c.Ratio > 1) == (st.Ratio > 1)
	}
	final := changes.Detect(l.Obs, o)
	used := make([]bool, len(final))
	for _, st := range l.Steps {
		for i, c := range final {
			if !used[i] && match(c, st, 2) {
				used[i] = true
				t.Found++
				if c.At == st.At {
					t.Dated++
				}
				if nodes := changes.Attribute(l.Obs, final, i, o); true {
					t.Named++
					want := []string(nil)
					if l.Node != "" {
						want = []string{l.Node}
					}
					if !slices.Equal(nodes, want) {
						t.NamedWrong++
					}
				}
				break
			}
		}
	}
	t.Calls = len(final)
	for i, c := range final {
		switch {
		case used[i]:
		case c.Mix != "" && (c.Explained || c.NewKind):
			t.Machine++
		default:
			t.Wrong++
		}
	}
	if t.Wrong > 0 {
		t.FalseSeries = 1
	}
	if !sc.Nightly {
		return t
	}
	first, third := make([]bool, len(l.Steps)), make([]bool, len(l.Steps))
	for night := changes.MinRef + 1; night <= len(l.Obs); night++ {
		t.Nights++
		for _, j := range changes.AtNewest(l.Obs[:night], o) {
			// the first night's rule, as opx history check --fail-on-regression 5 --new-only
			// gates (TestBenchRuleIsTheGate holds the two equal): a standing change is not
			// counted again
			if !j.Fails(5, true, true) {
				continue
			}
			hit := false
			for k, st := range l.Steps {
				if match(j.Change, st, 2) && st.Ratio > 1 {
					hit = true
					if night-1 == st.At && j.At == st.At {
						first[k] = true
					}
					if night-1 <= st.At+2 {
						third[k] = true
					}
				}
			}
			switch {
			case hit:
			case j.At == l.Outlier && night-1 == l.Outlier:
				t.OutlierNights++
			default:
				t.FalseGate++
			}
		}
	}
	for k, st := range l.Steps {
		if st.Ratio <= 1 { // a speed-up never fails the gate
			continue
		}
		t.Slower++
		if first[k] {
			t.FirstNight++
		}
		if third[k] {
			t.ByThird++
		}
	}
	return t
}

func span(young bool) string {
	if young {
		return "3-5"
	}
	return "6-12"
}

func size(r float64) string {
	if r >= 2 {
		return strconv.Itoa(int(r)) + "x"
	}
	return strconv.Itoa(int(math.Round((r-1)*100))) + "%"
}

func pct(f float64) string { return strconv.Itoa(int(math.Round(f*100))) + "%" }
