// history-bench measures what opx history check gives users — the changes it finds, the
// gate's verdict night by night (changes.AtNewest, a 5% gate), the nodes it names
// (changes.Attribute) — on labelled series of many shapes (internal/history/synth): young
// stores, several steps per series, outliers before a step, steps on every node or on one,
// stationary stores of 1, 10 and 10,000 series; pools of machines of two and three kinds;
// noise that drifts (AR(1)); and the corpus of earlier figures; then what a 1,000-run
// series costs. It prints the per-scenario table of docs/history.md.
//
//	go run ./scripts/history-bench              (draw 1, 200 series a scenario)
//	go run ./scripts/history-bench -draw 2
package main

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/history/synth"
)

func main() {
	draw := flag.Uint64("draw", 1, "the scenarios' random draw (the generator's seed)")
	count := flag.Int("count", 200, "series per scenario")
	realPath := flag.String("real", "internal/history/testdata/real/django-asv.tsv.gz", "a real history (scripts/real-history-django.py); \"\" skips it")
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
	if *realPath != "" {
		if err := real(*realPath); err != nil {
			fmt.Fprintln(os.Stderr, "history-bench:", err)
			os.Exit(1)
		}
	}
	for _, shape := range []string{"quiet", "steps"} {
		ms, mb := long(*draw, shape == "steps")
		fmt.Printf("A 1,000-run series (%s) judged at its newest run: %.1f ms, %.1f MB allocated (the median of 20, one core)\n", shape, ms, mb)
	}
}

// long is what judging a 1,000-run series at its newest run (changes.AtNewest) costs: the
// median of 20 series' time (ms) and bytes allocated (MB), one at a time — quiet at 2%
// noise on six nodes, or with a 15% step every 50 runs and a slow drift.
func long(draw uint64, steps bool) (float64, float64) {
	rng := rand.New(rand.NewPCG(draw, 1000))
	var ms, mb []float64
	for range 20 {
		s := make([]changes.Obs, 1000)
		for i := range s {
			v := 20 * math.Exp(rng.NormFloat64()*0.02)
			if steps {
				v *= math.Pow(1.15, float64((i/50)%2)) * (1 + 0.0005*float64(i))
			}
			s[i] = changes.Obs{V: v, Node: string(rune('a' + rng.IntN(6)))}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		changes.AtNewest(s, changes.Defaults)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		ms = append(ms, took.Seconds()*1000)
		mb = append(mb, float64(after.TotalAlloc-before.TotalAlloc)/1e6)
	}
	slices.Sort(ms)
	slices.Sort(mb)
	return ms[len(ms)/2], mb[len(mb)/2]
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
	falseSeries := fmt.Sprintf("%.2f%%", 100*float64(t.FalseSeries)/float64(t.Series))
	if t.Machine > 0 {
		falseSeries += fmt.Sprintf(" (and %d said as a change of machine)", t.Machine)
	}
	fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", name, t.Series, rate(t.Found, t.Steps), rate(t.Dated, t.Found), first,
		precision, falseSeries, gate, rate(t.NamedWrong, t.Named))
}

// real prints what the detector says of a real history (no labels): over each whole
// series (what history check --lookback 1000 reads), its changes, the series and results
// files with a change, and the share of changes a sibling series (the same benchmark in
// another environment, measured by the same nightly jobs) confirms with a change of the
// same direction within 36 hours; then the gate replayed night by night on the newest 60
// runs of each series (history check's default lookback), a 5% gate: the nights some
// series fails it, and the series-nights that fail.
func real(path string) error {
	files, err := synth.ReadReal(path)
	if err != nil {
		return err
	}
	obs, at := synth.RealSeries(files)
	var keys []synth.RealKey
	for k, s := range obs {
		if len(s) >= 30 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b synth.RealKey) int { return strings.Compare(a.Env+a.Benchmark, b.Env+b.Benchmark) })
	type found struct {
		changes []changes.Change
		fails   []bool // per point from the 30th: the gate fails that night
		// the gate's new failures (a change new that night) with 10 nights after them, by
		// how many runs of the new level they rest on (1, 2-4, 5 or more), and of those how
		// many held: the median of the next 10 runs nearer the new level than the old
		newFails, held [3]int
	}
	out := make([]found, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				s := obs[keys[i]]
				out[i].changes = changes.Detect(s, changes.Defaults)
				for n := 30; n <= len(s); n++ {
					fail := false
					for _, j := range changes.AtNewest(s[max(0, n-60):n], changes.Defaults) {
						fail = fail || j.Fails(5, true, false)
						if j.Fails(5, true, true) && n+10 <= len(s) {
							b := 1
							switch {
							case j.After == 1:
								b = 0
							case j.After >= 5:
								b = 2
							}
							out[i].newFails[b]++
							next := changes.Level(s, n, n+10)
							if math.Abs(next-j.Level) < math.Abs(next-(j.Level-math.Log(j.Ratio))) {
								out[i].held[b]++
							}
						}
					}
					out[i].fails = append(out[i].fails, fail)
				}
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	type start struct {
		at     time.Time
		slower bool
		env    string
	}
	starts := map[string][]start{} // benchmark: its changes' first files, every environment
	var points, nChanged, nChanges, confirmed, nights, failNights, seriesNights, seriesFails int
	changedFiles := map[int]bool{}
	failedAt := map[time.Time]bool{}
	nightsAt := map[time.Time]bool{}
	var newFails, held [3]int
	for i, k := range keys {
		for b := range 3 {
			newFails[b] += out[i].newFails[b]
			held[b] += out[i].held[b]
		}
		points += len(obs[k])
		if len(out[i].changes) > 0 {
			nChanged++
		}
		for _, c := range out[i].changes {
			f := at[k][c.At]
			changedFiles[f] = true
			starts[k.Benchmark] = append(starts[k.Benchmark], start{files[f].At, c.Ratio > 1, k.Env})
		}
		for j, fail := range out[i].fails {
			t := files[at[k][30+j-1]].At.Truncate(24 * time.Hour)
			nightsAt[t] = true
			seriesNights++
			if fail {
				seriesFails++
				failedAt[t] = true
			}
		}
	}
	for i, k := range keys {
		for _, c := range out[i].changes {
			nChanges++
			t := files[at[k][c.At]].At
			if slices.ContainsFunc(starts[k.Benchmark], func(s start) bool { // another environment's
				return s.env != k.Env && s.slower == (c.Ratio > 1) && s.at.Sub(t).Abs() <= 36*time.Hour
			}) {
				confirmed++
			}
		}
	}
	nights, failNights = len(nightsAt), len(failedAt)
	fmt.Printf("\nA real history (%s: %d results files, %s to %s; no labels): %d series of 30 runs or more, %d points\n",
		path, len(files), files[0].At.Format("2006-01-02"), files[len(files)-1].At.Format("2006-01-02"), len(keys), points)
	fmt.Printf("- each whole series: %d changes, %.2f a series; %.0f%% of series with one; a change starts at %d of %d results files (one in %.1f); %.0f%% confirmed by a sibling series (the benchmark in another environment, the same direction, within 36 h)\n",
		nChanges, float64(nChanges)/float64(len(keys)), 100*float64(nChanged)/float64(len(keys)), len(changedFiles), len(files),
		float64(len(files))/float64(max(1, len(changedFiles))), 100*float64(confirmed)/float64(max(1, nChanges)))
	fmt.Printf("- the gate replayed night by night (the newest 60 runs, 5%%): fails on %d of %d nights (%.1f%%); %d of %d series-nights (%.2f%%)\n",
		failNights, nights, 100*float64(failNights)/float64(max(1, nights)), seriesFails, seriesNights, 100*float64(seriesFails)/float64(max(1, seriesNights)))
	byDay := map[string][2]int{} // a day's changes: slower, faster
	for _, st := range starts {
		for _, x := range st {
			d := byDay[x.at.Format("2006-01-02")]
			if x.slower {
				d[0]++
			} else {
				d[1]++
			}
			byDay[x.at.Format("2006-01-02")] = d
		}
	}
	days := slices.Collect(maps.Keys(byDay))
	slices.SortFunc(days, func(a, b string) int {
		return cmp.Or(cmp.Compare(byDay[b][0]+byDay[b][1], byDay[a][0]+byDay[a][1]), strings.Compare(a, b))
	})
	var waves []string
	for _, d := range days[:min(4, len(days))] {
		waves = append(waves, fmt.Sprintf("%s %d slower, %d faster", d, byDay[d][0], byDay[d][1]))
	}
	fmt.Printf("- the days with the most changes: %s\n", strings.Join(waves, "; "))
	fmt.Printf("- the gate's new failures with 10 nights after them, and how many held then (the median of the next 10 runs nearer the new level): on the newest run alone %d (%d held), on 2-4 runs %d (%d), on 5 or more %d (%d)\n",
		newFails[0], held[0], newFails[1], held[1], newFails[2], held[2])
	return nil
}
