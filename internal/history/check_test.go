package history

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/testenv"
	"github.com/semianalysis/opx/internal/verdict"
)

// genRun is one generated nightly run of a store's history: each series' value in it, with
// its node and driver.
type genRun struct {
	values       map[string]float64
	node, driver map[string]string
	outcome      map[string]verdict.Outcome
}

// genHistory is a generated nightly history: runs of series "s0".."sN", lognormal noise
// of 1%, every series on node-a and node-b by turns, driver 550.54.
func genHistory(runs, series int, seed uint64) []genRun {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]genRun, runs)
	for i := range out {
		r := genRun{values: map[string]float64{}, node: map[string]string{}, driver: map[string]string{}, outcome: map[string]verdict.Outcome{}}
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
	s, err := Open(t.Context(), dsn, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i, r := range hist {
		rec := &recorded{runID: fmt.Sprintf("nightly-%02d", i), attempt: 1, at: day0.AddDate(0, 0, i), sourceSHA: fmt.Sprintf("%040x", i+1),
			opxVersion: "opx test", cells: map[string]*pyjson.Object{"c": pyjson.NewObject()}}
		rec.origin = rec.at.Format(time.RFC3339Nano)
		for j := 0; j < len(r.values); j++ {
			k := fmt.Sprintf("s%d", j)
			p := point{key: k, testlist: "t", op: "gemm", args: fmt.Sprintf(`{"m": %d}`, j), backend: "vllm", cluster: "h200", ws: 1,
				metric: "latency_us", lower: true, outcome: r.outcome[k], gpuSeconds: 0.5, cell: "c",
				ctx: context_{Node: r.node[k], GPU: "NVIDIA H200", Driver: r.driver[k], ImageDigest: "sha256:aaa"}}
			if p.outcome == verdict.Measured {
				p.value = r.values[k]
			}
			rec.points = append(rec.points, p)
		}
		if err := s.write(t.Context(), "gen", rec); err != nil {
			t.Fatal(err)
		}
	}
	return s
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
		if bad := f.Regressions(5, 1); len(bad) != 0 {
			t.Errorf("the gate fails on changes older than the newest run: %+v", bad)
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
		if len(f.Changes) != 0 || len(f.Regressions(5, 1)) != 0 {
			t.Errorf("an A/A history: %+v", f.Changes)
		}
	})
	eachStore(t, func(t *testing.T, dsn string) {
		hist := genHistory(30, 20, 3)
		hist[29].values["s5"] *= 1.10
		hist[29].values["s6"] *= 1.03
		f, err := storeOf(t, dsn, hist).Check(t.Context(), defaultsForTest())
		if err != nil {
			t.Fatal(err)
		}
		bad := f.Regressions(5, 1)
		if len(bad) != 1 || bad[0].Key != "s5" || bad[0].Status != "suspected" || bad[0].RunID != "nightly-29" {
			t.Errorf("a 10%% step at the newest run: %+v (all: %+v)", bad, f.Changes)
		}
	})
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
	first := strings.Index(dom, `<div class="plot"><h3>s7</h3>`)
	if first < 0 || !strings.Contains(dom, "driver 550.54 → 555.42") || !strings.Contains(dom, `class="cp"`) || strings.Count(dom, "<tr><td") != 30 {
		t.Errorf("the page lacks the changed series, its change point or a row per series:\n%.3000s", dom)
	}
	if b.Len() > 200_000 {
		t.Errorf("the page is %d bytes for 30 series", b.Len())
	}
}
