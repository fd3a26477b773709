// history-bench measures what opx history check gives users — the changes it finds, the
// gate's verdict night by night (changes.AtNewest, a 5% gate), the nodes it names
// (changes.Attribute) — on labelled series of many shapes (internal/history/synth): young
// stores, several steps per series, outliers before a step, steps on every node or on one,
// stationary stores of 1, 10 and 10,000 series; and the corpus of earlier figures. It
// prints the per-scenario table of docs/history.md.
//
//	go run ./scripts/history-bench              (draw 1, 200 series a scenario)
//	go run ./scripts/history-bench -draw 2
package main

import (
	"flag"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/history/synth"
)

func main() {
	draw := flag.Uint64("draw", 1, "the scenarios' random draw (the generator's seed)")
	count := flag.Int("count", 200, "series per scenario")
	flag.Parse()
	o := changes.Defaults
	fmt.Printf("draw %d, %d series a scenario, defaults %+v, a 5%% gate\n\n", *draw, *count, o)
	fmt.Println("| Scenario | Series | Recall | Dated at the step | Gate fails on the first night (by the third) | Precision | Series with a false change | False gate nights | Nodes named wrongly |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	scs := synth.Scenarios(*draw, *count)
	for _, n := range []int{1, 10, 10000} {
		scs = append(scs, synth.AAStore(*draw+uint64(n), n, 60))
	}
	for _, sc := range scs {
		row(sc.Name, sc.Nightly, measure(sc, o))
	}
	// the corpus of the earlier figures (steps of 2-20% at 1-3% noise, outliers, drift)
	corpus := synth.Make(synth.Default)
	var goal, aa synth.Score
	for _, s := range corpus {
		sc := synth.Judge(s, changes.Detect(s.Obs, o))
		if s.Noise <= 0.02 && (s.Kind == synth.AA || s.Kind == synth.Outliers || math.Abs(s.Step) >= 0.05 && (s.Kind == synth.Step || s.Kind == synth.StepOut)) {
			goal = goal.Add(sc)
		}
		if s.Kind == synth.AA {
			aa = aa.Add(sc)
		}
	}
	fmt.Printf("\nThe earlier corpus (synth.Default, draw 1): steps >= 5%% at 1-2%% noise among A/A and outlier series: %s\n", goal)
	fmt.Printf("Its A/A series: %s\n", aa)
}

// measure is the scenario's tally, its series judged on every core.
func measure(sc synth.Scenario, o changes.Options) synth.Tally {
	workers := runtime.GOMAXPROCS(0)
	parts := make([]synth.Tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			part := sc
			part.Series = nil
			for i := w; i < len(sc.Series); i += workers {
				part.Series = append(part.Series, sc.Series[i])
			}
			parts[w] = synth.Measure(part, o)
		})
	}
	wg.Wait()
	var t synth.Tally
	for _, p := range parts {
		t = t.Add(p)
	}
	return t
}

func row(name string, nightly bool, t synth.Tally) {
	rate := func(a, b int) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", float64(a)/float64(b))
	}
	first, gate := "–", "–"
	if nightly {
		first = fmt.Sprintf("%s (%s)", rate(t.FirstNight, t.Slower), rate(t.ByThird, t.Slower))
		gate = fmt.Sprintf("%d of %d", t.FalseGate, t.Nights)
		if t.OutlierNights > 0 {
			gate += fmt.Sprintf(" (and %d outlier nights)", t.OutlierNights)
		}
	}
	precision := "–"
	if t.Calls > 0 {
		precision = rate(t.Calls-t.Wrong, t.Calls)
	}
	fmt.Printf("| %s | %d | %s | %s | %s | %s | %.2f%% | %s | %s |\n", name, t.Series, rate(t.Found, t.Steps), rate(t.Dated, t.Found), first,
		precision, 100*float64(t.FalseSeries)/float64(t.Series), gate, rate(t.NamedWrong, t.Named))
}
