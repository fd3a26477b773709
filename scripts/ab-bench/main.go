// ab-bench measures the paired A/B judgement (internal/ab) on simulated cases: the base and
// head of a case measured in rounds of ABBA on one node, every run with its own noise, the
// node's level shared by both sides of a pair, and a drift through the allocation when
// asked. It prints issue 59's statistical goals as measured: a 3% slowdown at 1% per-run
// noise found within 10 pairs; A/A pull requests whose check fails; a node-to-node offset
// of 10%; and what ABBA order buys against a drift.
//
//	go run ./scripts/ab-bench            (draw 1; about 10 s)
//	go run ./scripts/ab-bench -draw 2
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/semianalysis/opx/internal/ab"
)

// sim is how one case is measured.
type sim struct {
	ratio  float64 // head/base of the metric (a latency: above 1 is slower)
	noise  float64 // each run's lognormal spread
	offset float64 // the second node's level over the first's; pairs in turn on each
	drift  float64 // each run's level over the one before it (the allocation warming)
	abab   bool    // pairs in AB order every time, not ABBA
	tails  bool    // Laplace noise (heavier tails) of the same spread
}

// measure judges a case as opx would: MinPairs pairs, then a round more while it is unsure,
// up to max pairs.
func measure(rng *rand.Rand, s sim, o ab.Options) ab.Result {
	var pairs []ab.Pair
	t := 0 // runs so far in the allocation
	run := func(level float64) float64 {
		e := rng.NormFloat64() * s.noise
		if s.tails {
			u := rng.Float64() - 0.5
			e = -math.Copysign(1, u) * math.Log(1-2*math.Abs(u)) * s.noise / math.Sqrt2
		}
		t++
		return level * math.Exp(e+s.drift*float64(t))
	}
	for {
		r, err := ab.Judge(pairs, true, o)
		if err != nil {
			panic(err)
		}
		more := ab.More(r, o)
		if more == 0 {
			return r
		}
		for range more {
			level := 100.0
			if len(pairs)%4 >= 2 { // the second node: rounds in turn
				level *= s.offset
			}
			var p ab.Pair
			if !ab.HeadFirst(len(pairs)) || s.abab { // AB
				p.Base = run(level)
				p.Head = run(level * s.ratio)
			} else { // BA
				p.Head = run(level * s.ratio)
				p.Base = run(level)
			}
			pairs = append(pairs, p)
		}
	}
}

func main() {
	draw := flag.Uint64("draw", 1, "the simulation's random draw")
	flag.Parse()
	rng := rand.New(rand.NewPCG(*draw, 59))
	o := ab.Defaults
	fmt.Printf("draw %d; rules %+v\n\n", *draw, o)
	fmt.Println("| Cases | Pairs at most | Slower | Faster | Same | Unsure | Check fails | Mean pairs |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	family := 1 // the cases the check judges together (ab.Options.Cases)
	row := func(name string, s sim, max, n int) {
		oo := o
		oo.MaxPairs, oo.Cases = max, family
		count := map[ab.Verdict]int{}
		fails, pairs := 0, 0
		for range n {
			r := measure(rng, s, oo)
			count[r.Verdict]++
			pairs += r.Pairs
			if r.Fails {
				fails++
			}
		}
		pct := func(k int) string { return fmt.Sprintf("%.2f%%", 100*float64(k)/float64(n)) }
		fmt.Printf("| %s (%d) | %d | %s | %s | %s | %s | %s | %.1f |\n", name, n, max, pct(count[ab.Slower]), pct(count[ab.Faster]), pct(count[ab.Same]), pct(count[ab.Unsure]), pct(fails), float64(pairs)/float64(n))
	}
	const n = 4000
	row("3% slower, 1% noise", sim{ratio: 1.03, noise: 0.01, offset: 1}, 10, n)
	row("3% slower, 1% noise, two nodes 10% apart", sim{ratio: 1.03, noise: 0.01, offset: 1.1}, 10, n)
	row("3% slower, 1% noise, heavy tails", sim{ratio: 1.03, noise: 0.01, offset: 1, tails: true}, 10, n)
	row("3% slower, 1% noise", sim{ratio: 1.03, noise: 0.01, offset: 1}, 20, n)
	row("3% slower, 2% noise", sim{ratio: 1.03, noise: 0.02, offset: 1}, 20, n)
	row("A/A, 1% noise", sim{ratio: 1, noise: 0.01, offset: 1}, 20, n)
	row("A/A, 1% noise, two nodes 10% apart", sim{ratio: 1, noise: 0.01, offset: 1.1}, 20, n)
	row("A/A, 1% noise, heavy tails", sim{ratio: 1, noise: 0.01, offset: 1, tails: true}, 20, n)
	row("A/A, 1% noise, a drift of 0.3% a run, ABBA", sim{ratio: 1, noise: 0.01, offset: 1, drift: 0.003}, 20, n)
	row("A/A, 1% noise, a drift of 0.3% a run, AB every time", sim{ratio: 1, noise: 0.01, offset: 1, drift: 0.003, abab: true}, 20, n)
	row("2% slower, 1% noise (at the threshold)", sim{ratio: 1.02, noise: 0.01, offset: 1}, 20, n)
	row("5% slower, 1% noise", sim{ratio: 1.05, noise: 0.01, offset: 1}, 20, n)
	// one case of a pull request's 20: the check judges it at their family level
	family = 20
	row("3% slower, 1% noise, one of 20 cases", sim{ratio: 1.03, noise: 0.01, offset: 1}, 20, n)
	row("5% slower, 1% noise, one of 20 cases", sim{ratio: 1.05, noise: 0.01, offset: 1}, 20, n)
	row("A/A, 10% noise, one of 20 cases", sim{ratio: 1, noise: 0.10, offset: 1}, 20, n)
	family = 1
	row("A/A, 10% noise (each case alone)", sim{ratio: 1, noise: 0.10, offset: 1}, 20, n)

	// A/A pull requests: 20 affected cases each; the check fails when any fails, each judged
	// at their family level
	const prs, cases = 1000, 20
	fo := o
	fo.Cases = cases
	for _, noise := range []float64{0.01, 0.10} {
		failed, named := 0, 0
		for range prs {
			f, u := false, false
			for range cases {
				r := measure(rng, sim{ratio: 1, noise: noise, offset: 1.1}, fo)
				f = f || r.Fails
				u = u || r.Verdict == ab.Slower || r.Verdict == ab.Unsure
			}
			if f {
				failed++
			}
			if u {
				named++
			}
		}
		fmt.Printf("\nA/A pull requests of %d cases at %.0f%% noise, two nodes 10%% apart (%d): the check fails on %.2f%%; %.1f%% name a case slower or unsure\n", cases, 100*noise, prs, 100*float64(failed)/prs, 100*float64(named)/prs)
	}
}
