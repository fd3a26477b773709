// history-bench measures the history detector on labelled series (internal/history/synth)
// and prints, per kind of series, noise and step size, its recall, precision and the share
// of series with a false change: the figures of docs/history.md.
//
//	go run ./scripts/history-bench            (the default corpus: 8,100 series)
//	go run ./scripts/history-bench -seed 7    (another draw of it)
package main

import (
	"flag"
	"fmt"
	"math"
	"sort"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/history/synth"
)

func main() {
	seed := flag.Uint64("seed", synth.Default.Seed, "the corpus' random seed")
	flag.Parse()
	spec := synth.Default
	spec.Seed = *seed
	corpus := synth.Make(spec)
	found := make([][]changes.Change, len(corpus))
	for i, s := range corpus {
		found[i] = changes.Detect(s.Obs, changes.Defaults)
	}
	groups := map[string]synth.Score{}
	var keys []string
	add := func(k string, sc synth.Score) {
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = groups[k].Add(sc)
	}
	for i, s := range corpus {
		sc := synth.Judge(s, found[i])
		add(fmt.Sprintf("%-12s noise %.0f%% step %4.0f%%", s.Kind, s.Noise*100, math.Abs(s.Step)*100), sc)
		if s.Noise <= 0.02 && (s.Kind == synth.AA || s.Kind == synth.Outliers || math.Abs(s.Step) >= 0.05 && (s.Kind == synth.Step || s.Kind == synth.StepOut)) {
			add("GOAL: steps >= 5% at 1-2% noise, with A/A and outlier series", sc)
		}
		if s.Kind == synth.AA {
			add("A/A series among the changing ones (bounded by the FDR)", sc)
		}
	}
	sort.Strings(keys)
	fmt.Printf("%d series of %d runs, seed %d, thresholds %+v\n", len(corpus), spec.N, spec.Seed, changes.Defaults)
	for _, k := range keys {
		fmt.Printf("%-60s %s\n", k, groups[k])
	}
	// a history where nothing changed: every series A/A
	aa := spec
	aa.AA, aa.Count = true, 1000
	var total synth.Score
	for _, s := range aaFound(aa) {
		total = total.Add(s)
	}
	fmt.Printf("%-60s %s\n", "GOAL: an A/A history (3,000 series, nothing changed)", total)
}

func aaFound(spec synth.Spec) []synth.Score {
	corpus := synth.Make(spec)
	found := make([][]changes.Change, len(corpus))
	for i, s := range corpus {
		found[i] = changes.Detect(s.Obs, changes.Defaults)
	}
	out := make([]synth.Score, len(corpus))
	for i, s := range corpus {
		out[i] = synth.Judge(s, found[i])
	}
	return out
}
