package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/summary"
)

// row builds a crafted result row: m is the gemm size (the case), metrics in order.
func row(m int, backend, status string, kv ...any) results.Row {
	args := pyjson.Obj("m", m, "n", 64, "k", 64)
	key, _ := pyjson.Marshal(args, pyjson.Identity)
	text, _ := pyjson.Marshal(args, pyjson.Default) // in its order, as a row writes it
	a, _ := summary.ParseArgs(text)
	r := results.Row{Testlist: "t", OpType: "gemm", Args: a, ArgsKey: string(key), ArgsLabel: a.Label(),
		Backend: backend, Cluster: "h200", WorldSize: 1, Status: status,
		Metrics: map[string]float64{}, Samples: map[string][]float64{}}
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case float64:
			r.Metrics[k] = v
			r.MetricOrder = append(r.MetricOrder, k)
		case []float64:
			r.Samples[k] = v
		}
	}
	return r
}

// compareRows joins two runs' rows as compare reads them (a side each, made by the steps
// Read takes), with opt's key and filters.
func compareRows(base, nw []results.Row, opt Options) *Result {
	side := func(dir, id string, rows []results.Row, keep Filter) *Run {
		s := newRun(opt.Key, keep)
		s.add(rows, make([]judged, len(rows)))
		s.finish(&results.Run{Dir: dir, RunID: id})
		return s
	}
	return Join(side("base", "1", base, opt.Base), side("new", "2", nw, opt.New), opt)
}

func lat(m int, med, lo, hi float64) results.Row {
	return row(m, "vllm", "ok", "latency_us", med, "latency_min_us", lo, "latency_max_us", hi)
}

func byArgs(t *testing.T, r *Result, m string) Case {
	t.Helper()
	for _, c := range r.Cases() {
		if strings.HasPrefix(c.Args, "m="+m+" ") {
			return c
		}
	}
	t.Fatalf("no case m=%s in %+v", m, r.Cases())
	return Case{}
}

func TestCompareClassesCraftedRuns(t *testing.T) {
	base := []results.Row{
		lat(1, 100, 98, 102), // regression: new interval entirely above
		lat(2, 100, 98, 102), // improvement
		lat(3, 100, 90, 110), // noise: moved 5 % inside the spread
		lat(4, 100, 99, 101), // same: 1 % change
		lat(5, 100, 98, 102), // only in base
		lat(7, 100, 98, 102), // broken in new
		row(8, "vllm", "ok", "gflops", 500.0, "gflops_samples", []float64{490, 495, 500, 505, 510}), // throughput regression
		row(9, "vllm", "ok", "tflops", 100.0, "latency_us", 10.0),                                   // no spread: latency is primary
		row(10, "vllm", "ok", "gbps", 100.0),                                                        // no spread, 3 % move: ambiguous
	}
	nw := []results.Row{
		lat(1, 130, 127, 133),
		lat(2, 70, 69, 71),
		lat(3, 105, 92, 112),
		lat(4, 101, 100, 102),
		lat(6, 50, 49, 51), // only in new
		row(7, "vllm", "error", "latency_us", 1.0),
		row(8, "vllm", "ok", "gflops", 400.0, "gflops_samples", []float64{390, 395, 400, 405, 410}),
		row(9, "vllm", "ok", "tflops", 110.0, "latency_us", 9.0),
		row(10, "vllm", "ok", "gbps", 97.0),
	}
	r := compareRows(base, nw, DefaultOptions)
	want := map[string]string{"1": Slower, "2": Faster, "3": Ambiguous, "4": Same, "5": OnlyBase, "6": OnlyNew,
		"7": Broken, "8": Slower, "9": Faster, "10": Ambiguous}
	for m, class := range want {
		if c := byArgs(t, r, m); c.Class != class {
			t.Errorf("m=%s: class %s, want %s (%+v)", m, c.Class, class, c.Primary)
		}
	}
	// the change is one speed-up everywhere: a latency 100 -> 130 us is 1.30x slower, its
	// ratio new/base 1.3; a throughput 500 -> 400 is 1.25x slower, ratio 0.8
	if c := byArgs(t, r, "1"); c.Primary.Change != "1.30x slower" || c.Primary.Ratio != 1.3 || c.Primary.Direction != "lower" {
		t.Errorf("m=1 change %+v, want 1.30x slower on a lower-is-better metric", c.Primary)
	}
	if c := byArgs(t, r, "2"); c.Primary.Change != "1.43x faster" || c.Primary.Speedup <= 1 {
		t.Errorf("m=2 change %+v, want 1.43x faster (100 -> 70 us)", c.Primary)
	}
	if c := byArgs(t, r, "8"); c.Primary.Name != "gflops" || c.Primary.Direction != "higher" || c.Primary.Change != "1.25x slower" ||
		c.Primary.Ratio != 0.8 || !strings.Contains(c.Primary.Noise, "IQR of 5 samples") {
		t.Errorf("m=8: %+v, want gflops higher-is-better 1.25x slower from sample IQR", c.Primary)
	}
	if c := byArgs(t, r, "9"); c.Primary.Name != "latency_us" || c.Primary.Noise != "no spread recorded" {
		t.Errorf("m=9 primary %+v, want latency_us without spread", c.Primary)
	}
	// regressions worst first: m=1 (1.30x) before m=8 (1.25x)
	if r.Case(0).Args[:3] != "m=1" || r.Case(1).Args[:3] != "m=8" {
		t.Errorf("order: %s, %s", r.Case(0).Args, r.Case(1).Args)
	}
	// the gate: slower by a factor of 1 + PCT/100 or more, broken, and — unless allowed —
	// missing from the new run
	for _, c := range []struct {
		pct     float64
		missing bool
		want    int
	}{{26, false, 3}, {25, false, 4}, {25, true, 3}, {31, true, 1}} { // m=1 1.30x, m=8 1.25x, broken m=7, missing m=5
		if got := len(r.Regressions(c.pct, c.missing)); got != c.want {
			t.Errorf("regressions at %g %% (missing allowed: %v): %d, want %d", c.pct, c.missing, got, c.want)
		}
	}
	var md bytes.Buffer
	r.Markdown(&md)
	out := md.String()
	for _, s := range []string{"### Regressions (worst first) (2)", "| t gemm m=1 n=64 k=64 | vllm | h200 | 1 | latency_us | 100.0 µs | 130.0 µs | 1.30x slower |",
		"### Broken: ok in base, not ok now (1)", "### Only in base (missing from new) (1)", "### Only in new (1)",
		"<details><summary>Ambiguous", "**10 cases:** 2 slower, 1 broken, 2 faster, 2 ambiguous, 1 same, 1 only-base, 1 only-new"} {
		if !strings.Contains(out, s) {
			t.Errorf("markdown lacks %q:\n%s", s, out)
		}
	}
	if strings.Index(out, "Regressions") > strings.Index(out, "Improvements") {
		t.Error("regressions must come before improvements")
	}
}

func TestCompareKeyIncludesBackendClusterWorldSize(t *testing.T) {
	a := lat(1, 100, 99, 101)
	b := lat(1, 50, 49, 51)
	b.Backend = "sglang"
	c := lat(1, 50, 49, 51)
	c.WorldSize = 2
	d := lat(1, 50, 49, 51)
	d.Cluster = "b200"
	r := compareRows([]results.Row{a}, []results.Row{b, c, d}, DefaultOptions)
	if r.Counts[OnlyBase] != 1 || r.Counts[OnlyNew] != 3 {
		t.Fatalf("counts %v: a different backend, world size or cluster is a different case", r.Counts)
	}
}

// --key and the filters join what the default key keeps apart: one run's vllm rows against
// its sglang rows, or one cluster against another.
func TestCompareKeyAndFilters(t *testing.T) {
	v := lat(1, 100, 99, 101)
	sg := lat(1, 50, 49, 51)
	sg.Backend = "sglang"
	other := lat(2, 70, 69, 71)
	other.Backend = "sglang"
	run := []results.Row{v, sg, other}
	key := []string{"testlist", "op", "args", "world_size", "cluster"}
	r := compareRows(run, run, Options{Same: 0.02, NoSpread: 0.05, Key: key, Base: Filter{"backend": "vllm"}, New: Filter{"backend": "sglang"}})
	if r.Len() != 2 || r.Counts[Faster] != 1 || r.Counts[OnlyNew] != 1 {
		t.Fatalf("vllm vs sglang: %v", r.Counts)
	}
	if c := byArgs(t, r, "1"); c.Primary.Change != "2.00x faster" {
		t.Errorf("sglang against vllm: %+v", c.Primary)
	}
	var md bytes.Buffer
	r.Markdown(&md)
	if !strings.Contains(md.String(), "Joined on testlist, op, args, world_size, cluster.") {
		t.Errorf("the summary does not say the key:\n%s", md.String())
	}
}

func TestCompareDuplicateKeysKeepLastRow(t *testing.T) {
	base := []results.Row{lat(1, 100, 99, 101)}
	nw := []results.Row{lat(1, 300, 299, 301), lat(1, 100, 99, 101)}
	r := compareRows(base, nw, DefaultOptions)
	if r.New.Duplicate != 1 || r.Case(0).Class != Same {
		t.Fatalf("dup %d class %s", r.New.Duplicate, r.Case(0).Class)
	}
}

func TestDirectionOf(t *testing.T) {
	for name, want := range map[string]results.Direction{
		"latency_us": results.Lower, "time_ms": results.Lower, "kernel_ns": results.Lower, "latency_p50_us": results.Neutral,
		"latency_min_us": results.Neutral, "latency_max_us": results.Neutral, "gflops": results.Higher,
		"tflops": results.Higher, "bandwidth_gbps": results.Higher, "tokens_per_s": results.Higher,
		"iterations": results.Neutral, "threads": results.Neutral, "gflops_samples": results.Neutral,
	} {
		for _, when := range []string{"first asked", "asked again (remembered)"} {
			if got := results.DirectionOf(name); got != want {
				t.Errorf("%s, %s: %s, want %s", name, when, got, want)
			}
		}
	}
}

// A row above its hardware's limit is never an improvement: the case is "impossible".
func TestCompareImpossibleIsNotFaster(t *testing.T) {
	b := lat(1, 100, 99, 101)
	n := lat(1, 1, 0.9, 1.1)
	n.Impossible = true
	b.SOLPct, n.SOLPct = 41.5, 4150
	r := compareRows([]results.Row{b}, []results.Row{n}, DefaultOptions)
	if r.Counts[Impossible] != 1 || r.Counts[Faster] != 0 {
		t.Fatalf("counts %v", r.Counts)
	}
	// each side's place against the limits travels with the case (JSON pct_of_roofline)
	if p := r.Case(0).PctOfRoofline; p == nil || p.Base != 41.5 || p.New != 4150 {
		t.Errorf("pct_of_roofline %v", p)
	}
	var md bytes.Buffer
	r.Markdown(&md)
	if !strings.Contains(md.String(), "### Impossible: above the hardware's limit") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

// A table of the Markdown lists the worst TableRows cases of its class and says how many
// it left out: 250 regressions make a step summary of 100 rows, worst first, and every
// case is still in the JSON.
func TestMarkdownTablesAreCapped(t *testing.T) {
	var base, nw []results.Row
	for m := range 250 {
		base = append(base, row(m, "vllm", "ok", "latency_us", 10.0))
		nw = append(nw, row(m, "vllm", "ok", "latency_us", 20.0+float64(m)))
	}
	r := compareRows(base, nw, Options{Same: 0.02, NoSpread: 0.05})
	var md, js bytes.Buffer
	r.Markdown(&md)
	if err := r.WriteJSON(t.Context(), &js); err != nil {
		t.Fatal(err)
	}
	// the caller's context: a --json interrupted stops writing
	stopped, stop := context.WithCancel(t.Context())
	stop()
	if err := r.WriteJSON(stopped, io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteJSON with its context cancelled: %v", err)
	}
	out := md.String()
	if n := strings.Count(out, "| t gemm "); n != TableRows {
		t.Errorf("%d rows in the tables, want %d", n, TableRows)
	}
	if !strings.Contains(out, "### Regressions (worst first) (250)") || !strings.Contains(out, "… and 150 more (`opx compare --json FILE` lists every case).") {
		t.Errorf("the table does not say what it left out:\n%s", out)
	}
	if !strings.Contains(out, "| t gemm m=249 n=64 k=64 |") || strings.Contains(out, "| t gemm m=0 n=64 k=64 |") {
		t.Error("the table does not list the worst regressions")
	}
	var doc struct {
		Cases []struct {
			Class string `json:"class"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	slower := 0
	for _, c := range doc.Cases {
		if c.Class == Slower {
			slower++
		}
	}
	if slower != 250 {
		t.Errorf("%d slower cases in the JSON, want 250", slower)
	}
}
