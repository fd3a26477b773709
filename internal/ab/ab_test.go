package ab

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The signed-rank statistic's lower critical counts are the published table's
// (two-sided: n=10 at 0.01, T <= 3; n=10 at 0.05, T <= 8; n=8 at 0.01, T <= 0; n=20 at
// 0.05, T <= 52; n=6 at 0.01, none), each counted here from its exact distribution.
func TestSignedRankTable(t *testing.T) {
	for _, c := range []struct {
		n     int
		alpha float64
		crit  int // the largest T rejected; -1: none
	}{{10, 0.01, 3}, {10, 0.05, 8}, {8, 0.01, 0}, {20, 0.05, 52}, {6, 0.01, -1}, {15, 0.01, 15}} {
		if k := lowerCount(c.n, c.alpha/2); k != c.crit+1 {
			t.Errorf("n=%d alpha=%v: k=%d, want %d", c.n, c.alpha, k, c.crit+1)
		}
	}
}

// pairs draws n pairs of a case whose head is ratio times its base, each run with
// lognormal noise of the spread given; tails draws from a Laplace law instead (heavier
// tails); each pair on a node of its own level (node: the spread of the nodes' offsets).
func pairs(rng *rand.Rand, n int, ratio, noise, node float64, tails bool) []Pair {
	out := make([]Pair, n)
	draw := func() float64 {
		if tails {
			u := rng.Float64() - 0.5
			return -math.Copysign(1, u) * math.Log(1-2*math.Abs(u)) * noise / math.Sqrt2
		}
		return rng.NormFloat64() * noise
	}
	for i := range out {
		level := 100 * math.Exp(rng.NormFloat64()*node)
		out[i] = Pair{Base: level * math.Exp(draw()), Head: level * ratio * math.Exp(draw())}
	}
	return out
}

// The interval covers the true ratio at its level, at normal and at heavier-tailed noise,
// with 8, 10 and 20 pairs.
func TestIntervalCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tails := range []bool{false, true} {
		for _, n := range []int{8, 10, 20} {
			miss := 0
			const cases = 4000
			for range cases {
				r, err := Judge(pairs(rng, n, 1.03, 0.01, 0, tails), true, Defaults)
				if err != nil {
					t.Fatal(err)
				}
				if r.Lo > 1.03 || r.Hi < 1.03 {
					miss++
				}
			}
			// 99% intervals: at most 1% missed, and a few more by chance (4,000 draws)
			if rate := float64(miss) / cases; rate > 0.016 {
				t.Errorf("tails %t, %d pairs: the interval missed the true ratio in %.2f%% of cases", tails, n, 100*rate)
			}
		}
	}
}

// What is shared by both sides of a pair — its node's offset — changes nothing.
func TestNodeOffsetCancels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := pairs(rng, 10, 1.03, 0.01, 0, false)
	q := make([]Pair, len(p))
	for i, x := range p {
		f := []float64{1, 1.1}[i%2] // two nodes 10% apart, pairs in turn
		q[i] = Pair{x.Base * f, x.Head * f}
	}
	a, _ := Judge(p, true, Defaults)
	b, _ := Judge(q, true, Defaults)
	if math.Abs(a.Ratio-b.Ratio) > 1e-12 || math.Abs(a.Lo-b.Lo) > 1e-12 || math.Abs(a.Hi-b.Hi) > 1e-12 || a.Verdict != b.Verdict {
		t.Errorf("a node offset moved the judgement: %+v, %+v", a, b)
	}
}

func TestVerdicts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name  string
		ratio float64
		lower bool
		n     int
		want  Verdict
		fails bool
	}{
		{"10% slower latency", 1.10, true, 10, Slower, true},
		{"10% lower latency", 1 / 1.10, true, 10, Faster, false},
		{"10% more throughput", 1.10, false, 10, Faster, false},
		{"10% less throughput", 1 / 1.10, false, 10, Slower, true},
		{"the same", 1, true, 20, Same, false},
		{"too few pairs to tell", 1.10, true, 5, Unsure, false},
	} {
		r, err := Judge(pairs(rng, c.n, c.ratio, 0.002, 0.05, false), c.lower, Defaults)
		if err != nil || r.Verdict != c.want || r.Fails != c.fails {
			t.Errorf("%s: %+v %v, want %s (fails %t)", c.name, r, err, c.want, c.fails)
		}
	}
	// slower, but not surely beyond the threshold: named, not failed
	r, _ := Judge(pairs(rng, 10, 1.02, 0.003, 0, false), true, Defaults)
	if r.Verdict != Slower || r.Fails {
		t.Errorf("2%% slower against a 2%% threshold: %+v", r)
	}
	if _, err := Judge([]Pair{{1, 1}, {0, 1}}, true, Defaults); err == nil {
		t.Error("a pair with a zero value was judged")
	}
	if _, err := Judge([]Pair{{math.Inf(1), 1}}, true, Defaults); err == nil {
		t.Error("a pair with an infinite value was judged")
	}
	if r, _ := Judge(nil, true, Defaults); r.Verdict != Unsure || r.Fails {
		t.Errorf("no pairs: %+v", r)
	}
}

// An unsure case gets a round (2 pairs) more until MaxPairs; a decided one none; every
// case at least MinPairs.
func TestMore(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want int
	}{
		{Result{Pairs: 0, Verdict: Unsure}, 8},
		{Result{Pairs: 8, Verdict: Unsure}, 2},
		{Result{Pairs: 8, Verdict: Slower}, 0},
		{Result{Pairs: 19, Verdict: Unsure}, 1},
		{Result{Pairs: 20, Verdict: Unsure}, 0},
	} {
		if got := More(c.r, Defaults); got != c.want {
			t.Errorf("%+v: %d more, want %d", c.r, got, c.want)
		}
	}
}

// In ABBA order a linear drift through the allocation cancels: an A/A case whose runs each
// read 1% above the run before is measured the same, where AB every time reads it 1%
// slower.
func TestABBACancelsDrift(t *testing.T) {
	var abba, ab []Pair
	run := 0
	next := func() float64 { run++; return 100 * math.Pow(1.01, float64(run)) }
	for i := range 10 {
		var p Pair
		if HeadFirst(i) {
			p.Head, p.Base = next(), next()
		} else {
			p.Base, p.Head = next(), next()
		}
		abba = append(abba, p)
	}
	for range 10 {
		ab = append(ab, Pair{Base: next(), Head: next()})
	}
	r1, _ := Judge(abba, true, Defaults)
	r2, _ := Judge(ab, true, Defaults)
	if math.Abs(r1.Ratio-1) > 1e-9 || r1.Verdict != Same {
		t.Errorf("ABBA under a drift: %+v", r1)
	}
	if math.Abs(r2.Ratio-1.01) > 1e-9 || r2.Verdict != Slower {
		t.Errorf("AB every time under a drift reads it slower: %+v", r2)
	}
}
