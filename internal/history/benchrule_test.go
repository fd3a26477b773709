package history

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/history/synth"
	"github.com/semianalysis/opx/internal/verdict"
)

// scripts/history-bench counts a false gate night where changes.AtNewest's changes fail
// changes.Judged.Fails(5, lower, newOnly): the rule for one series with nothing else in the
// store. This holds it to what users run: the same series written night by night to a real
// store, opx history check's Found.Regressions with --fail-on-regression 5 --new-only names
// a series on exactly the nights the benchmark's rule fails it — on plain series, pools of
// machine kinds (their kinds recorded as a GPU and a clock), an outlier then a step, noise
// that drifts and young series' first nights.
func TestBenchRuleIsTheGate(t *testing.T) {
	var picked []synth.Scenario
	for _, sc := range append(append(synth.Scenarios(3, 6), synth.Pools(3, 6)...), synth.AR1(3, 2)...) {
		if strings.Contains(sc.Name, "mixed pool") || strings.Contains(sc.Name, "outlier") || strings.Contains(sc.Name, "0.6") ||
			strings.Contains(sc.Name, "after 8") || strings.Contains(sc.Name, "young store: 6-12") {
			picked = append(picked, sc)
		}
	}
	if len(picked) < 10 {
		t.Fatalf("%d scenarios picked: the scenarios' names moved", len(picked))
	}
	fired := 0
	for si, sc := range picked {
		n := len(sc.Series[0].Obs)
		var series [][]changes.Obs
		for _, l := range sc.Series {
			if len(l.Obs) == n {
				series = append(series, l.Obs)
			}
		}
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "h.db"), true, 0)
		if err != nil {
			t.Fatal(err)
		}
		for night := range n {
			r := genRun{values: map[string]float64{}, node: map[string]string{}, driver: map[string]string{}, clock: map[string]string{}, outcome: map[string]verdict.Outcome{}}
			for j, obs := range series {
				k := fmt.Sprintf("s%d", j)
				x := obs[night]
				r.values[k], r.node[k], r.driver[k], r.outcome[k] = x.V, x.Node, "550.54", verdict.Measured
				if x.Kind != "" {
					_, r.clock[k], _ = strings.Cut(x.Kind, " at ") // MI300X at 2100 MHz: the store says NVIDIA H200 at 2100 MHz
				}
			}
			addGen(t, s, night, r)
			if night+1 <= changes.MinRef {
				continue
			}
			f, err := s.Check(t.Context(), defaultsForTest())
			if err != nil {
				t.Fatal(err)
			}
			var gate, bench []string
			for _, c := range f.Regressions(Gate{Pct: 5, Window: 1, NewOnly: true}) {
				gate = append(gate, c.Key)
			}
			for j, obs := range series {
				o := obs[:night+1]
				if slices.ContainsFunc(o, func(x changes.Obs) bool { return x.Kind != "" }) {
					o = slices.Clone(o)
					for i := range o {
						_, clock, _ := strings.Cut(o[i].Kind, " at ")
						o[i].Kind = "NVIDIA H200 at " + clock
					}
				}
				for _, jd := range changes.AtNewest(o, changes.Defaults) {
					if jd.Fails(5, true, true) {
						bench = append(bench, fmt.Sprintf("s%d", j))
						break
					}
				}
			}
			slices.Sort(gate)
			gate = slices.Compact(gate)
			if !slices.Equal(gate, bench) {
				t.Errorf("%s (%d), night %d: the gate fails %v, the benchmark's rule %v", sc.Name, si, night, gate, bench)
			}
			fired += len(bench)
		}
		s.Close()
	}
	if fired == 0 {
		t.Error("neither rule ever fired: the test shows nothing")
	}
	t.Logf("%d scenarios, %d series-nights failed by both", len(picked), fired)
}
