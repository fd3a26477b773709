package history

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/junit"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/testenv"
	"github.com/semianalysis/opx/internal/verdict"
)

// genRun is one generated nightly run of a store's history: each series' value in it, with
// its node and driver.
type genRun struct {
	values              map[string]float64
	node, driver, clock map[string]string
	outcome             map[string]verdict.Outcome
}

// genHistory is a generated nightly history: runs of series "s0".."sN", lognormal noise
// of 1%, every series on node-a and node-b by turns, driver 550.54.
func genHistory(runs, series int, seed uint64) []genRun {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]genRun, runs)
	for i := range out {
		r := genRun{values: map[string]float64{}, node: map[string]string{}, driver: map[string]string{}, clock: map[string]string{}, outcome: map[string]verdict.Outcome{}}
		for j := range series {
			k := fmt.Sprintf("s%d", j)
			r.values[k] = float64(10+j) * math.Exp(rng.NormFloat64()*0.01)
			r.node[k] = []string{"node-a", "node-b"}[(i+j)%2]
			r.driver[k] = "550.54"
			r.outcome[k] = verdict.Measured
		}
		out[i] = r
	}
	return out
}

var day0 = time.Date(2026, 9, 1, 2, 0, 0, 0, time.UTC)

// store writes the history into a store, a run a night.
func storeOf(t *testing.T, dsn string, hist []genRun) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i, r := range hist {
		addGen(t, s, i, r)
	}
	return s
}

// addGen writes the generated run r as the store's run nightly-i.
func addGen(t *testing.T, s *Store, i int, r genRun) {
	t.Helper()
	{
		rec := &recorded{runID: fmt.Sprintf("nightly-%02d", i), attempt: 1, at: day0.AddDate(0, 0, i), sourceSHA: fmt.Sprintf("%040x", i+1),
			opxVersion: "opx test", cells: map[string]*pyjson.Object{"c": pyjson.NewObject()}}
		rec.origin = rec.at.Format(time.RFC3339Nano)
		for j := 0; j < len(r.values); j++ {
			k := fmt.Sprintf("s%d", j)
			p := point{key: k, testlist: "t", op: "gemm", args: fmt.Sprintf(`{"m": %d}`, j), backend: "vllm", cluster: "h200", ws: 1,
				metric: "latency_us", lower: true, outcome: r.outcome[k], gpuSeconds: 0.5, cell: "c",
				ctx: context_{Node: r.node[k], GPU: "NVIDIA H200", Driver: r.driver[k], ImageDigest: "sha256:aaa", SMClock: r.clock[k]}}
			if p.outcome == verdict.Measured {
				p.value = r.values[k]
				rec.measured++
			}
			rec.points = append(rec.points, p)
		}
		if err := s.write(t.Context(), "gen", rec); err != nil {
			t.Fatal(err)
		}
	}
}

// A store of generated nightly runs: check finds each known step at the run it starts,
// ties a driver change and a one-node shift to what changed, passes the gate on A/A
// history and fails it on a 10% step at the newest run — the same on SQLite and PostgreSQL.
func TestCheckFindsKnownChanges(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		hist := genHistory(40, 8, 1)
		for i := 20; i < 40; i++ {
			hist[i].values["s1"] *= 1.10 // s1: 10% slower from nightly-20
		}
		for i := 25; i < 40; i++ {
			hist[i].driver["s2"] = "555.42"
			hist[i].values["s2"] *= 0.93 // s2: 7% faster with the new driver
		}
		for i := 20; i < 40; i++ {
			if hist[i].node["s3"] == "node-b" {
				hist[i].values["s3"] *= 1.15 // s3: node-b alone turns 15% slower
			}
		}
		hist[39].outcome["s4"] = verdict.Error // s4: no longer measured
		s := storeOf(t, dsn, hist)
		f, err := s.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]Change{}
		for _, c := range f.Changes {
			if _, dup := byKey[c.Key]; dup {
				t.Errorf("two changes in %s: %+v", c.Key, f.Changes)
			}
			byKey[c.Key] = c
		}
		if len(byKey) != 3 {
			t.Errorf("changes in %d series, want s1, s2, s3: %+v", len(byKey), f.Changes)
		}
		if c := byKey["s1"]; c.RunID != "nightly-20" || c.Direction != "slower" || math.Abs(c.Ratio-1.1) > 0.03 || c.Status != "confirmed" {
			t.Errorf("s1: %+v", c)
		}
		if c := byKey["s2"]; c.RunID != "nightly-25" || c.Direction != "faster" || c.Provenance["driver"] != (Diff{"550.54", "555.42"}) {
			t.Errorf("s2 (driver): %+v", c)
		}
		if c := byKey["s3"]; c.Direction != "slower" || len(c.Nodes) != 1 || c.Nodes[0] != "node-b" || c.RunID < "nightly-19" || c.RunID > "nightly-21" {
			t.Errorf("s3 (node-b alone): %+v", c)
		}
		if len(f.Stopped) != 1 || f.Stopped[0].Key != "s4" || f.Stopped[0].Outcome != "error" {
			t.Errorf("stopped: %+v", f.Stopped)
		}
		if f.Series != 8 || f.Points != 320 {
			t.Errorf("series %d points %d, want 8 and 320", f.Series, f.Points)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1, NewOnly: true}); len(bad) != 0 {
			t.Errorf("--new-only fails on changes older than the newest run: %+v", bad)
		}
		// the standing rule: s1 is still 10% slower at the newest run, and nobody decided
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) == 0 || bad[0].Key != "s1" || slices.ContainsFunc(bad, func(c Change) bool { return c.Key == "s2" }) {
			t.Errorf("the standing gate fails on %v, want s1 first and never the faster s2", keyed(bad))
		}
		var md bytes.Buffer
		f.Markdown(&md)
		for _, want := range []string{"1.10x slower", "driver 550.54 → 555.42", "node-b", "No longer measured", "| s1 | latency_us |"} {
			if !strings.Contains(md.String(), want) {
				t.Errorf("the markdown lacks %q:\n%s", want, md.String())
			}
		}
	})
}

func defaultsForTest() CheckOptions { return CheckOptions{Options: changes.Defaults} }

// The gate: an A/A history passes; a 10% step at the newest run fails it (a suspect), and
// a 3% one does not fail a 5% gate.
func TestGateOnTheNewestRun(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		aa := storeOf(t, dsn, genHistory(30, 20, 2))
		f, err := aa.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Changes) != 0 || len(f.Regressions(Gate{Pct: 5, Window: 1})) != 0 {
			t.Errorf("an A/A history: %+v", f.Changes)
		}
	})
	eachStore(t, func(t *testing.T, dsn string) {
		// two gemm cases of twenty 10% slower at the newest run: corroborated, one alert
		hist := genHistory(30, 20, 3)
		hist[29].values["s5"] *= 1.10
		hist[29].values["s7"] *= 1.10
		hist[29].values["s6"] *= 1.03
		f, err := storeOf(t, dsn, hist).Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		bad := f.Regressions(Gate{Pct: 5, Window: 1})
		if len(bad) != 2 || bad[0].Key != "s5" && bad[0].Key != "s7" || bad[0].Status != "suspected" || bad[0].RunID != "nightly-29" ||
			bad[0].Corroboration != "1 of 19 sibling cases moved with it" {
			t.Errorf("a 10%% step of two cases at the newest run: %+v (all: %+v)", bad, f.Changes)
		}
		var md bytes.Buffer
		f.Gate = &Gate{Pct: 5, Window: 1}
		f.Markdown(&md)
		if len(f.Alerts) == 0 || !strings.Contains(md.String(), "- 2 gemm cases on h200, 1.") || !strings.Contains(md.String(), "slower, from run nightly-29 of 2026-09-30T02:00Z (source sha 00000000000") {
			t.Errorf("no alert of the two cases: %+v\n%s", f.Alerts, md.String())
		}
	})
	eachStore(t, func(t *testing.T, dsn string) {
		// one case of twenty 10% slower: uncorroborated, the gate waits a night, then fails
		hist := genHistory(31, 20, 3)
		hist[29].values["s5"] *= 1.10
		hist[30].values["s5"] *= 1.10
		s := storeOf(t, dsn, hist[:30])
		f, err := s.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 0 {
			t.Errorf("a lone 10%% step failed the gate on its first night: %+v", bad)
		}
		var md bytes.Buffer
		f.Gate = &Gate{Pct: 5, Window: 1}
		f.Markdown(&md)
		if !strings.Contains(md.String(), "**Uncorroborated: the gate waits for a second run**") || !strings.Contains(md.String(), "none of 19 sibling cases moved with it") {
			t.Errorf("the Markdown does not list the waiting change:\n%s", md.String())
		}
		addGen(t, s, 30, hist[30])
		if f, err = s.Check(t.Context(), defaultsForTest()); err != nil {
			t.Fatal(err)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 1 || bad[0].Key != "s5" {
			t.Errorf("a lone 10%% step did not fail the gate on its second night: %+v", bad)
		}
	})
	eachStore(t, func(t *testing.T, dsn string) {
		// one case 25% slower: large, fails at once though uncorroborated
		hist := genHistory(30, 20, 3)
		hist[29].values["s5"] *= 1.25
		f, err := storeOf(t, dsn, hist).Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 1 || bad[0].Key != "s5" || !bad[0].Uncorroborated {
			t.Errorf("a lone 25%% step at the newest run: %+v", bad)
		}
	})
}

// A pool of two kinds of machine, one 1.4x slower (its max SM clock lower), whose mix
// changes from nine nights in ten on the fast kind to nine in ten on the slow one: every
// night's gate passes, the check names no change of the code, and the Markdown says which
// kind each case was judged by. The same history with the clocks not recorded (nothing
// tells the machines apart) fails the gate: the kinds are what saves it.
func TestMixedPoolIsNoChange(t *testing.T) {
	pool := func(recorded bool) []genRun {
		hist := genHistory(40, 6, 11)
		for i, r := range hist {
			slow := i%10 == 3
			if i >= 22 {
				slow = i%10 != 3
			}
			for k := range r.values {
				r.node[k], r.clock[k] = "node-a", "1980 MHz"
				if slow {
					r.node[k], r.clock[k] = "node-b", "1500 MHz"
					r.values[k] *= 1.4
				}
				if !recorded {
					r.clock[k] = ""
				}
			}
		}
		return hist
	}
	eachStore(t, func(t *testing.T, dsn string) {
		hist := pool(true)
		s := storeOf(t, dsn, hist[:10])
		judgedByKind := 0
		for night := 10; night < 40; night++ {
			addGen(t, s, night, hist[night])
			f, err := s.Check(t.Context(), defaultsForTest())
			if err != nil {
				t.Fatal(err)
			}
			if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 0 {
				t.Errorf("night %d: the gate fails on a change of the mix: %+v", night, bad)
			}
			for _, c := range f.Changes {
				if c.MachinesChanged == "" || !c.machineOnly() {
					t.Errorf("night %d: a change of the code: %+v", night, c)
				}
			}
			if len(f.ByKind) > 0 {
				judgedByKind++
				var md bytes.Buffer
				f.Markdown(&md)
				if !strings.Contains(md.String(), "- NVIDIA H200 at 1500 MHz: 6 series, 1.") || !strings.Contains(md.String(), "the metric of NVIDIA H200 at 1980 MHz\n") {
					t.Errorf("night %d: the Markdown does not say which kind judged the cases:\n%s", night, md.String())
				}
			}
		}
		if judgedByKind < 10 {
			t.Errorf("judged by kind on %d nights", judgedByKind)
		}
	})
	hist := pool(false)
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist[:10])
	failed := 0
	for night := 10; night < 40; night++ {
		addGen(t, s, night, hist[night])
		f, err := s.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		failed += len(f.Regressions(Gate{Pct: 5, Window: 1}))
	}
	if failed == 0 {
		t.Error("with no kind recorded, the same history never failed the gate: the test shows nothing")
	}
}

// A pool whose kinds no context recorded (hosted runners: a new machine every night, one
// GPU model throughout, no clock) but whose levels take turns is judged by those levels:
// once the slow machines have run three nights apart, a change of the mix (one night in
// four on the slow machines, then three in four) fails the gate on no night, no slower
// change of the code is named, and the Markdown says the levels that judged the cases.
func TestUnrecordedPoolJudgedByItsLevels(t *testing.T) {
	hist := genHistory(40, 6, 13)
	for i, r := range hist {
		slow := i%4 == 1
		if i >= 24 {
			slow = i%4 != 1
		}
		for k := range r.values {
			r.node[k] = fmt.Sprintf("runner-%d", i) // a machine of its own each night
			if slow {
				r.values[k] *= 1.4
			}
		}
	}
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist[:12])
	byLevel := 0
	for night := 12; night < 40; night++ {
		addGen(t, s, night, hist[night])
		f, err := s.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 0 {
			t.Errorf("night %d: the gate fails on a change of the mix: %+v", night, bad)
		}
		for _, c := range f.Changes {
			if !c.machineOnly() && c.Direction == compare.Slower {
				t.Errorf("night %d: a slower change of the code: %+v", night, c)
			}
		}
		if len(f.ByKind) > 0 {
			byLevel++
			var md bytes.Buffer
			f.Markdown(&md)
			if !strings.Contains(md.String(), "- NVIDIA H200, unrecorded level 2: 6 series, 1.") || !strings.Contains(md.String(), "the metric of NVIDIA H200, unrecorded level 1\n") {
				t.Errorf("night %d: the Markdown does not say which level judged the cases:\n%s", night, md.String())
			}
		}
	}
	if byLevel < 10 {
		t.Errorf("judged by its levels on %d nights", byLevel)
	}
}

// A pool that moves onto a kind of machine its cases never ran on (a lower clock, 1.4x
// the metric) is said as a change of machine onto a new kind, in the JSON and the
// Markdown, and the gate passes every night of it: whether the machine or the code moved
// cannot be told until a run on the old kind.
func TestNewKindIsNotJudged(t *testing.T) {
	hist := genHistory(36, 4, 12)
	for i, r := range hist {
		for k := range r.values {
			r.node[k], r.clock[k] = "node-a", "1980 MHz"
			if i >= 30 {
				r.node[k], r.clock[k] = "node-c", "1500 MHz"
				r.values[k] *= 1.4
			}
		}
	}
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist[:30])
	said := 0
	for night := 30; night < 36; night++ {
		addGen(t, s, night, hist[night])
		f, err := s.Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 0 {
			t.Errorf("night %d: the gate fails on a move onto a new kind: %+v", night, bad)
		}
		var md bytes.Buffer
		f.Markdown(&md)
		for _, c := range f.Changes {
			if c.Machines != MachinesNewKind || c.MachinesChanged != "NVIDIA H200 at 1980 MHz → NVIDIA H200 at 1500 MHz" {
				t.Errorf("night %d: not said as a change onto a new kind: %+v", night, c)
			}
			if !strings.Contains(md.String(), "machines changed: NVIDIA H200 at 1980 MHz → NVIDIA H200 at 1500 MHz; a kind this series never ran on") {
				t.Errorf("night %d: the Markdown does not say it:\n%s", night, md.String())
			}
			said++
		}
	}
	if said == 0 {
		t.Error("the move onto a new kind was never said")
	}
}

// The page opens in headless Chromium with no console message, draws the changed series
// first with their change points and what changed under them, and stays small.
func TestPageInHeadlessChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	hist := genHistory(40, 30, 1)
	for i := 25; i < 40; i++ {
		hist[i].driver["s7"] = "555.42"
		hist[i].values["s7"] *= 1.12
	}
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist)
	o := defaultsForTest()
	o.All = true
	f, err := s.Check(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "history.html")
	var b bytes.Buffer
	if err := f.Page(&b); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(page, b.Bytes(), 0o644)
	dom, console := testenv.OpenInChromium(t, bin, page, filepath.Join(dir, "shot.png"))
	if len(console) > 0 {
		t.Errorf("console: %v", console)
	}
	first := strings.Index(dom, `<div class="plot"><h3 title="s7">s7</h3>`)
	if first < 0 || !strings.Contains(dom, "driver 550.54 → 555.42") || !strings.Contains(dom, `class="cp"`) || strings.Count(dom, "<tr><td") != 30 {
		t.Errorf("the page lacks the changed series, its change point or a row per series:\n%.3000s", dom)
	}
	// the plot reads as a plot: value ticks in the metric's unit, dated time ticks, each
	// change with its triage state
	if !strings.Contains(dom, `class="ax" text-anchor="end">`) || !strings.Contains(dom, " µs</text>") || !strings.Contains(dom, `class="tick"`) ||
		!strings.Contains(dom, ">Sep 2</text>") || !strings.Contains(dom, `triage: <span class="state open">open</span>`) {
		t.Errorf("the plot has no value or date ticks, or no triage state:\n%.3000s", dom[first:])
	}
	if b.Len() > 200_000 {
		t.Errorf("the page is %d bytes for 30 series", b.Len())
	}
}

// keyed is what makes two checks' changes the same: key, first run, direction.
func keyed(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Key+" "+c.RunID+" "+c.Direction)
	}
	slices.Sort(out)
	return out
}

// A young store: six quiet nights, then four cases 3x slower. The gate fails on the first
// slow night, each change dated at it, new and measured there; on the second slow night
// the same changes are reported (dated the same) but no longer new, so the gate passes.
func TestYoungStoreGate(t *testing.T) {
	hist := genHistory(8, 6, 4)
	for i := 6; i < 8; i++ {
		for _, k := range []string{"s0", "s1", "s2", "s3"} {
			hist[i].values[k] *= 3
		}
	}
	dir := t.TempDir()
	first := storeOf(t, filepath.Join(dir, "first.db"), hist[:7])
	f, err := first.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	bad := f.Regressions(Gate{Pct: 5, Window: 1})
	if got := keyed(bad); !slices.Equal(got, []string{"s0 nightly-06 slower", "s1 nightly-06 slower", "s2 nightly-06 slower", "s3 nightly-06 slower"}) {
		t.Errorf("after the first slow night the gate fails on %v, want s0-s3 from nightly-06 (all: %+v)", got, f.Changes)
	}
	second := storeOf(t, filepath.Join(dir, "second.db"), hist)
	f, err = second.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	if got := keyed(f.Changes); len(got) != 4 || got[0] != "s0 nightly-06 slower" {
		t.Errorf("after the second slow night: %v, want the same four changes from nightly-06", got)
	}
	if bad := f.Regressions(Gate{Pct: 5, Window: 1, NewOnly: true}); len(bad) != 0 {
		t.Errorf("--new-only: the second slow night fails the gate again on changes already reported: %v", keyed(bad))
	}
	if bad := f.Regressions(Gate{Pct: 5, Window: 1}); len(bad) != 4 {
		t.Errorf("the second slow night: the standing changes fail the gate again: %v, want s0-s3", keyed(bad))
	}
	if bad := f.Regressions(Gate{Pct: 5, Window: 2}); len(bad) != 4 {
		t.Errorf("--window 2 takes the changes of the newest two runs: %v", keyed(bad))
	}
	young := storeOf(t, filepath.Join(dir, "young.db"), hist[:3])
	f, err = young.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Young) != 6 || f.Young[0].Runs != 3 || f.Young[0].Needs != changes.MinRef+1 {
		t.Errorf("a store of three runs: young %+v, want each of 6 series with 3 of %d runs", f.Young, changes.MinRef+1)
	}
}

// A series' changes do not depend on the store: three 15% steps in one series, alone in a
// store, among 150 stationary series, and picked by a filter from them, give the same
// changes.
func TestSeriesIndependentOfStore(t *testing.T) {
	hist := genHistory(60, 151, 5)
	for i := range hist {
		hist[i].values["s0"] *= math.Pow(1.15, float64(i/15))
	}
	alone := make([]genRun, len(hist))
	for i, r := range hist {
		alone[i] = genRun{values: map[string]float64{"s0": r.values["s0"]}, node: r.node, driver: r.driver, outcome: r.outcome}
	}
	dir := t.TempDir()
	fa, err := storeOf(t, filepath.Join(dir, "alone.db"), alone).Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	want := keyed(fa.Changes)
	if !slices.Equal(want, []string{"s0 nightly-15 slower", "s0 nightly-30 slower", "s0 nightly-45 slower"}) {
		t.Errorf("alone: %v, want the three steps", want)
	}
	shared := storeOf(t, filepath.Join(dir, "shared.db"), hist)
	f, err := shared.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	var mine []Change
	for _, c := range f.Changes {
		if c.Key == "s0" {
			mine = append(mine, c)
		}
	}
	if got := keyed(mine); !slices.Equal(got, want) {
		t.Errorf("among 150 stationary series: %v, alone: %v", got, want)
	}
	if len(f.Changes)-len(mine) > 3 {
		t.Errorf("%d changes in 150 stationary series", len(f.Changes)-len(mine))
	}
	o := defaultsForTest()
	o.Filter = map[string]string{"args": `{"m": 0}`}
	f, err = shared.Check(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := keyed(f.Changes); f.Series != 1 || !slices.Equal(got, want) {
		t.Errorf("filtered to it: %d series, %v, alone: %v", f.Series, got, want)
	}
}

// One 20x night, then six nights 10x slower: the gate fails every slow night (at 10x, its
// size now); --new-only on the first alone.
func TestOutlierThenStepGate(t *testing.T) {
	hist := genHistory(27, 3, 6)
	hist[20].values["s1"] *= 20
	for i := 21; i < 27; i++ {
		hist[i].values["s1"] *= 10
	}
	dir := t.TempDir()
	for night := 21; night < 27; night++ {
		f, err := storeOf(t, filepath.Join(dir, fmt.Sprintf("h%d.db", night)), hist[:night+1]).Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		bad := f.Regressions(Gate{Pct: 5, Window: 1})
		if len(bad) != 1 || bad[0].Key != "s1" || math.Abs(bad[0].RatioNow-10) > 0.5 {
			t.Errorf("night %d, 10x slower: the gate fails on %v, want s1 standing at 10x (all: %+v)", night, keyed(bad), f.Changes)
		}
		bad = f.Regressions(Gate{Pct: 5, Window: 1, NewOnly: true})
		if night == 21 && (len(bad) != 1 || bad[0].Key != "s1") {
			t.Errorf("the first 10x night, --new-only: the gate fails on %v, want s1 (all: %+v)", keyed(bad), f.Changes)
		}
		if night > 21 && (len(bad) != 0 || len(f.Changes) == 0) {
			t.Errorf("night %d, --new-only: the gate fails on %v (changes %v): want the change reported, not new", night, keyed(bad), keyed(f.Changes))
		}
	}
}

// A run that measured nothing of a case (an error, or its results lost) lists it as not
// measured: the gate fails on it, as compare's does.
func TestUnmeasuredAtTheRunUnderTest(t *testing.T) {
	hist := genHistory(10, 4, 7)
	hist[9].outcome["s0"] = verdict.Error
	hist[9].outcome["s1"] = verdict.Missing
	f, err := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist).Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Unmeasured) != 2 || f.Unmeasured[0].Key != "s0" || f.Unmeasured[1].Outcome != "missing" {
		t.Errorf("unmeasured: %+v", f.Unmeasured)
	}
}

// The run under test is the one added last, not the one dated last: a run dated in the
// future (added by an older opx, or written into the store) does not stay "the newest".
func TestRunUnderTestIsTheLastAdded(t *testing.T) {
	hist := genHistory(12, 3, 8)
	hist[11].values["s2"] *= 1.5
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist)
	if _, err := s.db.Exec("UPDATE runs SET at = at + 86400*365 WHERE run_id = 'nightly-03'"); err != nil {
		t.Fatal(err)
	}
	f, err := s.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	if f.Newest.RunID != "nightly-11" {
		t.Errorf("the run under test is %s, want nightly-11 (added last)", f.Newest.RunID)
	}
	o := defaultsForTest()
	o.Run = "nightly-10"
	if f, err = s.Check(t.Context(), o); err != nil || f.Newest.RunID != "nightly-10" {
		t.Errorf("--run nightly-10: %v %+v", err, f.Newest)
	}
	o.Run = "nightly-99"
	if _, err = s.Check(t.Context(), o); err == nil || !strings.Contains(err.Error(), "holds no run of that id") {
		t.Errorf("--run of no run: %v", err)
	}
}

// A measured value opx could not have written (0, negative, not finite) is an error
// naming the series and run, never a pass.
func TestImpossibleStoredValues(t *testing.T) {
	for _, v := range []string{"0", "-3", "9e999"} {
		s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), genHistory(8, 2, 9))
		if _, err := s.db.Exec("UPDATE points SET value = " + v + " WHERE run = (SELECT MAX(id) FROM runs) AND series = (SELECT id FROM series WHERE key = 's1')"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Check(t.Context(), defaultsForTest()); err == nil || !strings.Contains(err.Error(), "series s1 holds an impossible measured value at run nightly-07") {
			t.Errorf("value %s: %v", v, err)
		}
	}
}

// A run added again unchanged writes nothing; resumed since (a newer attempt, more cases
// measured) it replaces its points, and its recovered cases are measured in the store.
func TestResumedRunReplacesItsPoints(t *testing.T) {
	hist := genHistory(6, 3, 10)
	hist[5].outcome["s2"] = verdict.Missing
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist)
	rec := &recorded{runID: "nightly-05", attempt: 1, at: day0.AddDate(0, 0, 5), sourceSHA: fmt.Sprintf("%040x", 6), opxVersion: "opx test",
		cells: map[string]*pyjson.Object{"c": pyjson.NewObject()}}
	rec.origin = rec.at.Format(time.RFC3339Nano)
	for j := range 3 {
		k := fmt.Sprintf("s%d", j)
		rec.points = append(rec.points, point{key: k, testlist: "t", op: "gemm", args: fmt.Sprintf(`{"m": %d}`, j), backend: "vllm", cluster: "h200", ws: 1,
			metric: "latency_us", lower: true, outcome: verdict.Measured, value: hist[5].values[k], cell: "c", ctx: context_{Node: "node-a"}})
	}
	rec.measured = 2
	rec.points[2].outcome = verdict.Missing
	if err := s.write(t.Context(), "again", rec); !errors.Is(err, errAlready) {
		t.Fatalf("the same run again: %v, want nothing written", err)
	}
	rec.attempt, rec.measured, rec.points[2].outcome = 2, 3, verdict.Measured
	if err := s.write(t.Context(), "resumed", rec); err != nil || rec.replaced == nil || rec.replaced.Measured != 2 || rec.replaced.Attempt != 1 {
		t.Fatalf("the resumed run: %v, replaced %+v", err, rec.replaced)
	}
	f, err := s.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Unmeasured) != 0 || f.Points != 18 {
		t.Errorf("after the resumed run: unmeasured %+v, %d points (want none, 18)", f.Unmeasured, f.Points)
	}
}

// history check --junit: a testcase for the check and one per change and unmeasured case,
// valid against the schema CI reporters read; a failure for each the gate fails on (a 10%
// step new at the newest run, a case it did not measure), an older change passing with
// its words in system-out (issue 48).
func TestCheckJUnit(t *testing.T) {
	hist := genHistory(30, 4, 3)
	for i := 10; i < 30; i++ {
		hist[i].values["s1"] *= 0.9 // s1: an older, faster change
	}
	hist[29].values["s2"] *= 1.3 // s2: 1.3x slower at the newest run
	hist[29].outcome["s3"] = verdict.Missing
	s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist)
	f, err := s.Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	for _, gate := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "check.xml")
		var g *Gate
		if gate {
			g = &Gate{Pct: 5, Window: 1}
		}
		if err := junit.Write(path, "opx history check", f.JUnit(g, ""), f.At()); err != nil {
			t.Fatal(err)
		}
		r := testenv.ValidJUnit(t, path)
		byName := map[string]string{}
		for _, c := range r.Suites[0].Cases {
			switch {
			case c.Failure != nil:
				byName[c.Name] = "failure " + c.Failure.Type + ": " + c.Failure.Message
			case c.Skipped != nil:
				byName[c.Name] = "skipped: " + c.Skipped.Message
			default:
				byName[c.Name] = "passed: " + c.Out
			}
		}
		if len(byName) != 4 || !strings.HasPrefix(byName["s2 latency_us"], "failure regression: latency_us 1.2") && strings.Contains(byName["s2 latency_us"], "x slower from run nightly-29 of ") ||
			!strings.HasPrefix(byName["s1 latency_us"], "passed: latency_us 1.11x faster from run nightly-10") ||
			!strings.HasPrefix(byName["the store's series are judged"], "passed: 4 series, 120 points; 2 change(s), 1 unmeasured") {
			t.Errorf("gate %v: %q", gate, byName)
		}
		if want := map[bool]string{true: "failure unmeasured: not measured by run nightly-29 (missing)", false: "skipped: not measured by run nightly-29 (missing)"}[gate]; byName["s3"] != want {
			t.Errorf("gate %v: s3 %q, want %q", gate, byName["s3"], want)
		}
		if r.Tests != 4 || r.Failures != map[bool]int{true: 2, false: 1}[gate] {
			t.Errorf("gate %v: %d tests, %d failures", gate, r.Tests, r.Failures)
		}
	}
	// nothing to judge: the check's own testcase fails with the gate's words
	empty := &Found{}
	path := filepath.Join(t.TempDir(), "empty.xml")
	if err := junit.Write(path, "opx history check", empty.JUnit(&Gate{Pct: 5, Window: 1}, "h.db holds no run: nothing to judge, the gate fails"), empty.At()); err != nil {
		t.Fatal(err)
	}
	if r := testenv.ValidJUnit(t, path); r.Failures != 1 || r.Suites[0].Cases[0].Failure.Message != "h.db holds no run: nothing to judge, the gate fails" {
		t.Errorf("nothing to judge: %+v", r)
	}
}

// A point's machine kind is said from its fingerprint: the GPUs' model and max SM clock, as
// a context of before the kind was kept is read (one machine is one kind across the
// upgrade); a machine without a GPU by its CPU, cores and memory.
func TestMachineKind(t *testing.T) {
	gpu := &fingerprint.Fingerprint{Vendor: "nvidia", GPUs: []fingerprint.GPU{{Model: "NVIDIA H200", MaxSMMHz: 1980, PowerLimitW: 700}, {Index: 1, Model: "NVIDIA H200", MaxSMMHz: 1980, PowerLimitW: 700}}}
	if got, old := machineKind(gpu, gpu.Summary()), (context_{GPU: "NVIDIA H200", SMClock: gpu.Summary().MaxSMClock}).kind(); got != "NVIDIA H200 at 1980 MHz" || got != old {
		t.Errorf("a GPU node: %q (a context of before: %q)", got, old)
	}
	cpu := &fingerprint.Fingerprint{Vendor: "none", CPU: "AMD EPYC 9654 96-Core Processor", Cores: 192, MemMiB: 773_000, CPUFlags: "sha256:0123456789ab", GPUs: []fingerprint.GPU{}}
	if got := machineKind(cpu, cpu.Summary()); got != "AMD EPYC 9654 96-Core Processor, 192 cores, 755 GiB" {
		t.Errorf("a CPU node: %q", got)
	}
	if got := machineKind(&fingerprint.Fingerprint{GPUs: []fingerprint.GPU{}}, fingerprint.Node{}); got != "" {
		t.Errorf("nothing known: %q", got)
	}
}

// A confirmation run on another kind of machine than measured a suspect's new level says
// nothing of it (a pool's kinds each have their own level): the suspect stays, marked
// inconclusive, and is not cleared; the same re-measurement on the suspect's own kind
// clears it.
func TestConfirmationOnAnotherKind(t *testing.T) {
	for _, tc := range []struct {
		clock   string
		cleared bool
	}{{"1500 MHz", false}, {"1980 MHz", true}} {
		hist := genHistory(20, 1, 21)
		for _, r := range hist {
			r.clock["s0"] = "1980 MHz"
		}
		hist[19].values["s0"] *= 1.12
		s := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist)
		at := day0.AddDate(0, 0, 19)
		rec := &recorded{runID: "confirm-nightly-19", attempt: 1, at: at.Add(time.Hour), sourceSHA: fmt.Sprintf("%040x", 20),
			opxVersion: "opx test", cells: map[string]*pyjson.Object{"c": pyjson.NewObject()},
			confirms: &Confirms{RunID: "nightly-19", At: at, Origin: at.Format(time.RFC3339Nano), Cases: []ConfirmedCase{{Key: "s0", Nodes: []string{"node-a"}}}}}
		rec.origin = rec.at.Format(time.RFC3339Nano)
		rec.points = []point{{key: "s0", testlist: "t", op: "gemm", args: `{"m": 0}`, backend: "vllm", cluster: "h200", ws: 1, metric: "latency_us", lower: true,
			outcome: verdict.Measured, value: 10, gpuSeconds: 0.5, cell: "c",
			ctx: context_{Node: "node-c", GPU: "NVIDIA H200", Driver: "550.54", ImageDigest: "sha256:aaa", SMClock: tc.clock}}}
		rec.measured = 1
		if err := s.write(t.Context(), "gen", rec); err != nil {
			t.Fatal(err)
		}
		o := defaultsForTest()
		o.Run = "nightly-19"
		f, err := s.Check(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if tc.cleared {
			if len(f.Cleared) != 1 || len(f.Changes) != 0 {
				t.Errorf("re-measured at the old level on its own kind: cleared %+v, changes %+v", f.Cleared, f.Changes)
			}
			continue
		}
		if len(f.Cleared) != 0 || len(f.Changes) != 1 || f.Changes[0].Status != Suspected ||
			!strings.HasPrefix(f.Changes[0].Confirmation, "inconclusive: run confirm-nightly-19 measured it on another kind of machine (NVIDIA H200 at 1500 MHz)") {
			t.Errorf("re-measured on another kind: cleared %+v, changes %+v", f.Cleared, f.Changes)
		}
	}
}

// A change in a pool of kinds is said between levels of one kind: its before and after are
// both on the most frequent kind's level, so their ratio is the change's (a 10% step on
// both kinds of a pool 1.4x apart, with the mix moving onto the slow kind at the step, is
// said as about 1.10, never as the 1.5x its runs' medians would say).
func TestPoolChangeSaidOnOneLevel(t *testing.T) {
	hist := genHistory(40, 1, 13)
	for i, r := range hist {
		slow := i%4 == 1 // a quarter of the nights on the slow kind, then three quarters
		if i >= 30 {
			slow = i%4 != 1
		}
		r.node["s0"], r.clock["s0"] = "node-a", "1980 MHz"
		if slow {
			r.node["s0"], r.clock["s0"] = "node-b", "1500 MHz"
			r.values["s0"] *= 1.4
		}
		if i >= 30 {
			r.values["s0"] *= 1.10
		}
	}
	f, err := storeOf(t, filepath.Join(t.TempDir(), "h.db"), hist).Check(t.Context(), defaultsForTest())
	if err != nil {
		t.Fatal(err)
	}
	var found *Change
	for i := range f.Changes {
		if f.Changes[i].RunID == "nightly-30" {
			found = &f.Changes[i]
		}
	}
	if found == nil || found.Ratio < 1.07 || found.Ratio > 1.13 || math.Abs(found.After/found.Before-found.Ratio) > 0.03 {
		t.Fatalf("a 10%% step on a pool: %+v (all %+v)", found, f.Changes)
	}
}
