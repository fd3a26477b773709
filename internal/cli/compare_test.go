package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// craftedRun writes a one-shard run directory whose rows have the given latencies
// (median, min, max in µs; a negative median writes an error row).
func craftedRun(t *testing.T, runID string, lat map[int][3]float64) string {
	t.Helper()
	metrics := map[int]string{}
	for m, l := range lat {
		if l[0] < 0 {
			metrics[m] = "error"
			continue
		}
		metrics[m] = fmt.Sprintf(`{"latency_us": %g, "latency_min_us": %g, "latency_max_us": %g, "gflops": %g}`, l[0], l[1], l[2], 1e3/l[0])
	}
	return craftedRunOf(t, runID, metrics)
}

// craftedRunOf is craftedRun with each row's metrics as JSON text (Python's: Infinity and
// NaN allowed); "error" writes an error row, "unsupported" an unsupported one.
func craftedRunOf(t *testing.T, runID string, metrics map[int]string) string {
	t.Helper()
	dir := t.TempDir()
	var cases, rows []string
	for m := 1; m <= 8; m++ {
		ms, ok := metrics[m]
		if !ok {
			continue
		}
		args := fmt.Sprintf(`{"m": %d, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}`, m)
		cases = append(cases, fmt.Sprintf(`{"testlist": "t", "shape": {"type": "gemm", "args": %s, "sources": []}}`, args))
		switch ms {
		case "error", "unsupported":
			rows = append(rows, fmt.Sprintf(`{"op": {"type": "gemm", "args": %s, "backend": "cpu", "sources": []}, "metrics": {}, "status": %q, "message": "boom", "testlist": "t"}`, args, ms))
			continue
		}
		rows = append(rows, fmt.Sprintf(`{"op": {"type": "gemm", "args": %s, "backend": "cpu", "sources": []}, "metrics": %s, "status": "ok", "testlist": "t"}`, args, ms))
	}
	cell := `{"id": "s1", "runner": "local", "cluster": "local", "world_size": 1, "image": "", "backends": ["cpu"], "cases": [` + strings.Join(cases, ", ") + `]}`
	os.WriteFile(filepath.Join(dir, "operatorx-manifest.json"), []byte(`{"version": 1, "include": [`+cell+`], "source_sha": "abc", "run_id": "`+runID+`"}`), 0o644)
	sd := filepath.Join(dir, "shards", "s1")
	os.MkdirAll(filepath.Join(sd, "results", "cpu", "local"), 0o755)
	os.WriteFile(filepath.Join(sd, "execution.json"), []byte(`{"cell": `+cell+`, "source_sha": "abc", "run_id": "`+runID+`", "attempt": "1", "stage": "/nonexistent"}`), 0o644)
	os.WriteFile(filepath.Join(sd, "status.json"), []byte(`{"exit_code": 0}`), 0o644)
	os.WriteFile(filepath.Join(sd, "results", "cpu", "local", "r.json"), []byte(`{"run": {"id": "x"}, "rows": [`+strings.Join(rows, ", ")+`]}`), 0o644)
	return dir
}

func TestCompareCommand(t *testing.T) {
	base := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}, 2: {100, 98, 102}, 3: {100, 90, 110}, 4: {100, 98, 102}, 5: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {120, 118, 122}, 2: {80, 79, 81}, 3: {104, 95, 112}, 4: {-1}, 6: {10, 9, 11}})
	js := filepath.Join(t.TempDir(), "out", "compare.json")

	r := runOpx(t, "compare", base, nw, "--json", js)
	if r.code != 0 {
		t.Fatalf("compare without --fail-on-regression: exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"### Regressions (worst first) (1)", "| t gemm m=1 n=64 k=64 a=fp32 b=fp32 out=fp32 | cpu | local | 1 | latency_us | 100.0 µs | 120.0 µs | 1.20x slower | min–max |",
		"### Broken: ok in base, not ok now (1)", "| boom |", "### Improvements (best first) (1)", "### Only in base (missing from new) (1)", "### Only in new (1)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	var doc struct {
		Base, New struct {
			RunID string `json:"run_id"`
		}
		Counts map[string]int
		Cases  []struct {
			Class, Key string
			Primary    *struct {
				Ratio, Speedup float64
				Change         string
			}
		}
	}
	b, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("--json: %v %s", err, b)
	}
	if doc.Base.RunID != "100" || doc.New.RunID != "101" || len(doc.Cases) != 6 || doc.Counts["ambiguous"] != 1 || doc.Cases[0].Class != "slower" {
		t.Errorf("json: %+v", doc)
	}
	// the JSON says the change as the summary does
	if p := doc.Cases[0].Primary; p == nil || p.Change != "1.20x slower" || p.Ratio != 1.2 || p.Speedup >= 1 {
		t.Errorf("json change of the regression: %+v", p)
	}

	if r := runOpx(t, "compare", base, nw, "--fail-on-regression", "30"); r.code != 1 ||
		!strings.Contains(r.stderr, "2 case(s) slower by a factor of 1.3 or more, broken, or missing from NEW (1 broken, 1 only-base)") {
		t.Errorf("a broken case fails any threshold: exit %d %q", r.code, r.stderr)
	}
	// without the broken and the missing case, the threshold decides
	nw2 := craftedRun(t, "102", map[int][3]float64{1: {120, 118, 122}, 2: {80, 79, 81}, 3: {104, 95, 112}, 4: {100, 98, 102}, 5: {100, 98, 102}})
	if r := runOpx(t, "compare", base, nw2, "--fail-on-regression", "30"); r.code != 0 {
		t.Errorf("1.2x slower under a 30 %% threshold: exit %d %s", r.code, r.stderr)
	}
	if r := runOpx(t, "compare", base, nw2, "--fail-on-regression", "15"); r.code != 1 {
		t.Errorf("1.2x slower over a 15 %% threshold: exit %d", r.code)
	}
	// a new run that measured nothing fails the gate, even when missing cases are allowed
	empty := craftedRun(t, "103", map[int][3]float64{})
	if r := runOpx(t, "compare", base, empty, "--fail-on-regression", "5"); r.code != 1 || !strings.Contains(r.stderr, "(5 only-base)") {
		t.Errorf("a new run with no rows: exit %d %q", r.code, r.stderr)
	}
	if r := runOpx(t, "compare", base, empty, "--fail-on-regression", "5", "--allow-missing"); r.code != 1 || !strings.Contains(r.stderr, "new: nothing measured to compare") {
		t.Errorf("--allow-missing with nothing measured: exit %d %q", r.code, r.stderr)
	}
	partial := craftedRun(t, "104", map[int][3]float64{1: {100, 98, 102}})
	if r := runOpx(t, "compare", base, partial, "--fail-on-regression", "5", "--allow-missing"); r.code != 0 {
		t.Errorf("--allow-missing: exit %d %q", r.code, r.stderr)
	}

	// bad input: one line, exit 1 or 2
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"compare", base}, 2, "accepts 2 arg(s)"},
		{[]string{"compare", base, filepath.Join(base, "nope")}, 1, "new: run directory " + filepath.Join(base, "nope") + ": not found"},
		{[]string{"compare", t.TempDir(), nw}, 1, "no operatorx-manifest.json in it; pass --base-manifest"},
		{[]string{"compare", base, nw, "--fail-on-regression", "-1"}, 2, "must be a finite percentage above 0"},
		{[]string{"compare", base, nw, "--same", "9", "--no-spread", "3"}, 2, "need 0 <= --same <= --no-spread"},
		{[]string{"compare", base, nw, "--key", "testlist,gpu"}, 2, "--key: unknown field gpu"},
		{[]string{"compare", base, nw, "--base-filter", "backend"}, 2, "--base-filter: backend is not FIELD=VALUE"},
	} {
		r := runOpx(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: exit %d %q, want %d %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

func TestReportCommand(t *testing.T) {
	dir := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}, 2: {-1}})
	r := runOpx(t, "report", dir)
	if r.code != 0 || strings.TrimSpace(r.stdout) != filepath.Join(dir, "report.html") {
		t.Fatalf("report: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(r.stderr, "opx report: run failed: 1 of 2 cases measured, 0 unsupported, 1 error, 0 missing; 1 of 1 shards did not succeed (s1)") {
		t.Errorf("report's verdict: %q", r.stderr)
	}
	for _, want := range []string{"failed: 1 of 2 cases measured, 0 unsupported, 1 error, 0 missing; 1 of 1 shards did not succeed (s1)", "100.0 µs", "boom"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// a broken results file: one line naming it, and the old page is left as it was
	os.WriteFile(filepath.Join(dir, "shards", "s1", "results", "cpu", "local", "r.json"), []byte(`{"rows": [`), 0o644)
	r = runOpx(t, "report", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "r.json") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("broken results: exit %d %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "report.html")); string(after) != string(page) {
		t.Error("a failed report replaced the previous page")
	}
}

// compare says when the two runs' nodes differ in what decides a GPU's speed, from the
// fingerprints their shards recorded, and counts rows measured on a throttled GPU.
func TestCompareSaysTheNodesDiffer(t *testing.T) {
	base := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {100, 98, 102}})
	fp := func(run, phase, driver string, limit, capUS int) {
		os.WriteFile(filepath.Join(run, "shards", "s1", "fingerprint-"+phase+".json"), []byte(fmt.Sprintf(`{"phase": %q, "node": "n1",
		  "vendor": "nvidia", "driver": %q, "toolkit": "CUDA 12.4", "gpus": [{"index": 0, "model": "NVIDIA H100 80GB HBM3",
		  "power_limit_w": %d, "max_sm_clock_mhz": 1980, "throttle_counters": {"sw_power_cap": %d}}]}`, phase, driver, limit, capUS)), 0o644)
	}
	fp(base, "before", "550.54.15", 700, 0)
	fp(base, "after", "550.54.15", 700, 0)
	fp(nw, "before", "570.86.15", 600, 10)
	fp(nw, "after", "570.86.15", 600, 5000010)
	js := filepath.Join(t.TempDir(), "c.json")
	r := runOpx(t, "compare", base, nw, "--json", js)
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "**The runs' nodes differ** (their fingerprints): driver 550.54.15 → 570.86.15; power limit 700 W → 600 W.") ||
		!strings.Contains(r.stdout, "**Throttled GPUs:** 0 base and 1 new row(s)") {
		t.Errorf("markdown:\n%s", r.stdout)
	}
	var doc struct {
		Nodes     []string       `json:"node_differences"`
		Throttled map[string]int `json:"throttled_rows"`
	}
	b, _ := os.ReadFile(js)
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Nodes) != 2 || doc.Throttled["new"] != 1 {
		t.Errorf("json: %v %+v", err, doc)
	}
}

// The gate cannot be fooled: each of these passed `compare --fail-on-regression 5` once
// (issue 29's adversarial pass); each fails it now with one line saying why.
func TestGateCannotBeFooled(t *testing.T) {
	ok := `{"latency_us": 100, "latency_min_us": 98, "latency_max_us": 102}`
	base := craftedRunOf(t, "200", map[int]string{1: ok, 2: ok, 3: ok})
	for _, c := range []struct {
		name string
		new  map[int]string
		args []string
		want string
	}{
		{"a base filter that matches nothing", map[int]string{1: ok, 2: ok, 3: ok}, []string{"--base-filter", "backend=cpuu"},
			"base: nothing measured to compare (3 rows in the run, 0 kept by --base-filter backend=cpuu: 0 unsupported, 0 error; values present: backend: cpu)"},
		{"a new filter that matches nothing", map[int]string{1: ok, 2: ok, 3: ok}, []string{"--new-filter", "cluster=h100"},
			"new: nothing measured to compare (3 rows in the run, 0 kept by --new-filter cluster=h100: 0 unsupported, 0 error; values present: cluster: local)"},
		{"a new run of unsupported rows only", map[int]string{1: "unsupported", 2: "unsupported", 3: "unsupported"}, nil,
			"new: nothing measured to compare (3 rows in the run; 3 unsupported, 0 error)"},
		{"a latency of Infinity", map[int]string{1: `{"latency_us": Infinity, "gflops": 5}`, 2: ok, 3: ok}, nil,
			"1 case(s) slower by a factor of 1.05 or more, broken, or missing from NEW (1 broken)"},
		{"a latency of NaN", map[int]string{1: `{"latency_us": NaN}`, 2: ok, 3: ok}, nil, "(1 broken)"},
		{"a latency of 0", map[int]string{1: `{"latency_us": 0, "latency_min_us": 0, "latency_max_us": 0}`, 2: ok, 3: ok}, nil, "(1 broken)"},
		{"a negative latency", map[int]string{1: `{"latency_us": -3}`, 2: ok, 3: ok}, nil, "(1 broken)"},
		{"a 10x slowdown with an impossible spread", map[int]string{1: `{"latency_us": 1000, "latency_p25_us": -5000, "latency_p75_us": 9000}`,
			2: `{"latency_us": 1000, "latency_min_us": 2000, "latency_max_us": 10}`, 3: ok}, nil, "(2 slower)"},
		{"a join key that is not unique", map[int]string{1: ok, 2: ok, 3: ok}, []string{"--key", "op"},
			`base: the join key (op) is not unique: 2 row(s) share a key with another, e.g. "gemm" (join on more fields with --key)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			nw := craftedRunOf(t, "201", c.new)
			r := runOpx(t, append([]string{"compare", base, nw, "--fail-on-regression", "5"}, c.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d %q, want 1 and %q", r.code, r.stderr, c.want)
			}
		})
	}
	// an invalid measurement is an error with its reason in every command: compare's
	// broken case, export's row (the value it had named), summarize's count
	nw := craftedRunOf(t, "202", map[int]string{1: `{"latency_us": Infinity, "gflops": 5}`, 2: ok, 3: ok})
	r := runOpx(t, "compare", base, nw)
	if r.code != 0 || !strings.Contains(r.stdout, "invalid measurement: latency_us is Infinity (a measured value must be finite and positive)") {
		t.Errorf("compare: exit %d\n%s", r.code, r.stdout)
	}
	r = runOpx(t, "export", nw, "--format", "jsonl")
	if r.code != 0 || !strings.Contains(r.stdout, `"status":"error","message":"invalid measurement: latency_us is Infinity`) ||
		!strings.Contains(r.stderr, "opx export: run failed: 2 of 3 cases measured, 0 unsupported, 1 error, 0 missing") {
		t.Errorf("export: exit %d %q\n%s", r.code, r.stderr, r.stdout)
	}
	// an impossible spread is set aside with a warning, not silently widened
	sp := craftedRunOf(t, "203", map[int]string{1: `{"latency_us": 100, "latency_p25_us": -5, "latency_p75_us": 101}`, 2: ok, 3: ok})
	r = runOpx(t, "compare", base, sp)
	if r.code != 0 || !strings.Contains(r.stderr, "opx compare: warning: new: 1 recorded spread(s) ignored, judged without one") ||
		!strings.Contains(r.stderr, "ignored: its IQR [-5, 101] is below zero") {
		t.Errorf("impossible spread: exit %d %q", r.code, r.stderr)
	}
}

// A run compared with itself is read once (compare.ReadSame): its answer is the one of
// comparing it with a copy of itself, read twice — with no filter, and with a filter on
// each side that keeps other rows — and a link to it is the run itself.
func TestCompareOneRunReadOnce(t *testing.T) {
	run := craftedRun(t, "7", map[int][3]float64{1: {10, 9, 11}, 2: {20, 19, 23}, 3: {-1}, 5: {7, 6.5, 7.2}})
	copied := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copied, os.DirFS(run)); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(run, link)
	for _, extra := range [][]string{nil, {"--base-filter", "runner=local", "--new-filter", "status=ok"}} {
		var got []string
		for _, nw := range []string{run, copied, link} {
			js := filepath.Join(t.TempDir(), "c.json")
			r := runOpx(t, append([]string{"compare", run, nw, "--allow-same", "--json", js}, extra...)...)
			b, _ := os.ReadFile(js)
			got = append(got, strings.ReplaceAll(fmt.Sprint(r.code, r.stdout, r.stderr, string(b)), nw, run))
			if r.code != 0 || !strings.Contains(string(b), `"measured":`) {
				t.Fatalf("compare %s %s %v: exit %d, %s%s", run, nw, extra, r.code, r.stderr, b)
			}
		}
		if extra != nil && !strings.Contains(got[0], `"counts":{"only-base":1,"same":3}`) {
			t.Errorf("%v: each side not filtered as it says: %s", extra, got[0])
		}
		if got[0] != got[1] || got[0] != got[2] {
			t.Errorf("%v: read once\n%s\nread twice\n%s\nby a link\n%s", extra, got[0], got[1], got[2])
		}
	}
}

// --junit: a testcase per case, valid against the schema CI reporters read; under the gate
// a failure for each case it fails on, without it for each slower or broken case; cases
// in one run only skipped (issue 48).
func TestCompareJUnit(t *testing.T) {
	base := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}, 2: {100, 98, 102}, 3: {100, 90, 110}, 4: {100, 98, 102}, 5: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {120, 118, 122}, 2: {80, 79, 81}, 3: {104, 95, 112}, 4: {-1}, 6: {10, 9, 11}})
	for _, c := range []struct {
		args               []string
		code, fail, skip   int
		failures, skipping []string
	}{
		// no gate: the 1.2x slower case and the broken one fail; only-base and only-new skip
		{nil, 0, 2, 2, []string{"slower", "broken"}, []string{"in base only", "in new only"}},
		// the gate at 30 %: 1.2x passes; broken and missing fail
		{[]string{"--fail-on-regression", "30"}, 1, 2, 1, []string{"broken", "only-base"}, []string{"in new only"}},
		{[]string{"--fail-on-regression", "15"}, 1, 3, 1, []string{"slower", "broken", "only-base"}, []string{"in new only"}},
	} {
		out := filepath.Join(t.TempDir(), "compare.xml")
		r := runOpx(t, append([]string{"compare", base, nw, "--junit", out}, c.args...)...)
		if r.code != c.code {
			t.Fatalf("%v: exit %d %s", c.args, r.code, r.stderr)
		}
		rep := testenv.ValidJUnit(t, out)
		if rep.Tests != 6 || rep.Failures != c.fail || rep.Skipped != c.skip {
			t.Errorf("%v: %d tests, %d failures, %d skipped; want 6, %d, %d", c.args, rep.Tests, rep.Failures, rep.Skipped, c.fail, c.skip)
		}
		var types, skips []string
		for _, tc := range rep.Suites[0].Cases {
			if tc.Failure != nil {
				types = append(types, tc.Failure.Type)
			}
			if tc.Skipped != nil {
				skips = append(skips, tc.Skipped.Message)
			}
			if tc.Classname != "t.gemm.cpu.local.ws1" || !strings.HasPrefix(tc.Name, "m=") {
				t.Errorf("testcase %q %q", tc.Classname, tc.Name)
			}
		}
		if strings.Join(types, ",") != strings.Join(c.failures, ",") || strings.Join(skips, ",") != strings.Join(c.skipping, ",") {
			t.Errorf("%v: failures %v skips %v, want %v %v", c.args, types, skips, c.failures, c.skipping)
		}
		if c.code == 0 && !strings.Contains(rep.Suites[0].Cases[0].Failure.Message, "latency_us 1.20x slower") {
			t.Errorf("the regression's message: %+v", rep.Suites[0].Cases[0].Failure)
		}
	}
	// nothing measured in new: a failed testcase says the comparison cannot be trusted
	out := filepath.Join(t.TempDir(), "compare.xml")
	empty := craftedRun(t, "103", map[int][3]float64{})
	if r := runOpx(t, "compare", base, empty, "--junit", out); r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	rep := testenv.ValidJUnit(t, out)
	last := rep.Suites[0].Cases[len(rep.Suites[0].Cases)-1]
	if last.Failure == nil || last.Failure.Type != "untrusted" || !strings.Contains(last.Failure.Message, "nothing measured") {
		t.Errorf("the untrusted comparison: %+v", last)
	}
}
