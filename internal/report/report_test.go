package report

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.html")

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gemm(m int, dtype string) string {
	return fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 4096, "k": 4096, "a": {"dtype": "%s"}, "b": {"dtype": "%s"}, "out": "bf16"}, "sources": []}`, m, dtype, dtype)
}

// Fixture writes a crafted run: shard A (h200, vllm, success, attempts 1 and 2 — the
// newer wins), shard B (b200, sglang, failed with error rows, one message carrying HTML),
// shard C (missing). Exported to the cli tests through testdata only; here it is built.
func fixture(t *testing.T) string {
	dir := t.TempDir()
	cell := func(id, cluster, backend string) string {
		return fmt.Sprintf(`{"id": "%s", "runner": "cluster:%s", "cluster": "%s", "nodes": 1, "gpus_per_node": 8, "world_size": 1,
 "image": "vllm/vllm-openai:v0.11", "mode": "timing", "backends": ["%s"], "offset": 0,
 "cases": [{"testlist": "gemm_perf", "shape": %s}, {"testlist": "gemm_perf", "shape": %s}, {"testlist": "gemm_perf", "shape": %s}],
 "digest": "sha256:%s", "import_uri": ""}`, id, cluster, cluster, backend, gemm(64, "bf16"), gemm(256, "bf16"), gemm(64, "fp8"),
			strings.Repeat(id[:1], 64))
	}
	write(t, filepath.Join(dir, "operatorx-manifest.json"), fmt.Sprintf(`{"version": 1, "excluded_shapes": 0, "include": [%s, %s, %s],
 "source_sha": "0123456789abcdef0123456789abcdef01234567", "run_id": "9001"}`,
		cell("a-shard", "h200", "vllm"), cell("b-shard", "b200", "sglang"), cell("c-shard", "mi355x", "vllm")))
	shard := func(sub, id, cluster, backend, attempt string, exit int, rows string) {
		d := filepath.Join(dir, sub)
		write(t, filepath.Join(d, "execution.json"), fmt.Sprintf(`{"cell": %s, "source_sha": "0123456789abcdef0123456789abcdef01234567",
 "run_id": "9001", "attempt": "%s", "stage": "/tmp/.operatorx-0/9001-%s-%s-x"}`, cell(id, cluster, backend), attempt, attempt, id))
		write(t, filepath.Join(d, "status.json"), fmt.Sprintf(`{"exit_code": %d}`, exit))
		write(t, filepath.Join(d, "results", "vllm", cluster, "r.json"), fmt.Sprintf(`{"schema_version": "1",
 "run": {"id": "20261201T000000Z-%s-abcde", "cluster": "%s", "operatorx_version": "0.4.0", "hostname": "%s-node-01",
 "software": {"torch": "2.9.0", "%s": "0.11.0"}, "env": {}}, "rows": [%s]}`, cluster, cluster, cluster, backend, rows))
	}
	ok := func(m int, dtype, backend string, lat, lo, hi, tflops float64) string {
		return fmt.Sprintf(`{"op": {"type": "gemm", "args": {"m": %d, "n": 4096, "k": 4096, "a": {"dtype": "%s"}, "b": {"dtype": "%s"}, "out": "bf16"}, "backend": "%s", "sources": []},
 "metrics": {"latency_us": %g, "latency_min_us": %g, "latency_max_us": %g, "tflops": %g}, "status": "ok", "testlist": "gemm_perf"}`,
			m, dtype, dtype, backend, lat, lo, hi, tflops)
	}
	bad := func(m int, dtype, backend, status, msg string) string {
		return fmt.Sprintf(`{"op": {"type": "gemm", "args": {"m": %d, "n": 4096, "k": 4096, "a": {"dtype": "%s"}, "b": {"dtype": "%s"}, "out": "bf16"}, "backend": "%s", "sources": []},
 "metrics": {}, "status": "%s", "message": %q, "testlist": "gemm_perf"}`, m, dtype, dtype, backend, status, msg)
	}
	shard("a1", "a-shard", "h200", "vllm", "1", 1, bad(64, "bf16", "vllm", "error", "stale attempt"))
	shard("a2", "a-shard", "h200", "vllm", "2", 0, strings.Join([]string{ok(64, "bf16", "vllm", 41.5, 40.9, 43.2, 829.1),
		ok(256, "bf16", "vllm", 120.25, 118, 125.5, 1143.2), bad(64, "fp8", "vllm", "unsupported", "vllm has no fp8 gemm on this image")}, ", "))
	defer func() { // b-shard's execute recorded its failure and its log (beyond the seed)
		write(t, filepath.Join(dir, "b1", "status.json"), `{"exit_code": 1, "slurm_jobs": ["77"], "failure": {"phase": "benchmark",
 "message": "benchmark step failed: srun returned non-zero exit status 1 (log: /out/benchmark.log)", "log": "benchmark.log"}}`)
		write(t, filepath.Join(dir, "b1", "benchmark.log"), "rank 0: loading sglang\nTraceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n")
	}()
	// b-shard's node, as opx fingerprint recorded it: GPU 0's power-cap counter grew while
	// the shard ran (GPU 1 is not the shard's: world size 1)
	fp := func(phase string, capUS int) string {
		return fmt.Sprintf(`{"phase": %q, "taken_at": "2026-12-01T00:00:00Z", "node": "b200-node-01", "cpu_model": "Intel(R) Xeon(R) Platinum 8570",
 "kernel": "6.8.0-48-generic", "enroot": "4.1.2", "pyxis": "0.24.0", "vendor": "nvidia", "driver": "570.86.15", "toolkit": "CUDA 12.8",
 "gpus": [{"index": 0, "model": "NVIDIA B200", "power_limit_w": 1000, "max_sm_clock_mhz": 1965, "temperature_c": %d, "ecc": "Enabled", "mig": "Disabled",
   "throttle_counters": {"sw_power_cap": %d, "hw_power_brake": 0}},
  {"index": 1, "model": "NVIDIA B200", "power_limit_w": 1000, "max_sm_clock_mhz": 1965, "temperature_c": 40, "ecc": "Enabled", "mig": "Disabled",
   "throttle_counters": {"sw_power_cap": 0}}]}`, phase, 40+capUS/1000000, capUS)
	}
	write(t, filepath.Join(dir, "b1", "fingerprint-before.json"), fp("before", 1200))
	write(t, filepath.Join(dir, "b1", "fingerprint-after.json"), fp("after", 41001200))
	shard("b1", "b-shard", "b200", "sglang", "1", 1, strings.Join([]string{ok(64, "bf16", "sglang", 30.1, 29.5, 31.0, 1141.6),
		bad(256, "bf16", "sglang", "error", "RuntimeError: CUDA error: <out of memory> & more | tb: x.py:1"),
		bad(64, "fp8", "sglang", "error", "RuntimeError: CUDA error: <out of memory> & more | tb: x.py:1")}, ", "))
	return dir
}

func render(t *testing.T, dir string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.html")
	if _, err := WriteFile(context.Background(), out, filepath.Join(dir, "operatorx-manifest.json"), dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// renderRun renders a run made in memory, not read.
func renderRun(t *testing.T, run *results.Run, rows []results.Row) string {
	t.Helper()
	b := newBuilder()
	for i := range rows {
		b.add(&rows[i])
	}
	var buf bytes.Buffer
	if err := b.write(t.Context(), &buf, run); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestReportGolden(t *testing.T) {
	got := render(t, fixture(t))
	golden := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("report differs from %s; inspect and rerun with -update if the change is intended", golden)
	}
}

func TestReportContent(t *testing.T) {
	page := string(render(t, fixture(t)))
	page += pageData(t, page) // the cases as data travel packed
	for _, s := range []string{
		"failed: 3 of 9 cases measured, 1 unsupported, 2 error, 3 missing; 2 of 3 shards did not succeed (b-shard, c-shard)",
		`<span class="badge missing">missing</span>`,
		"2 shard(s) did not succeed; why is under each.",
		// why each shard failed: the phase, the reason, the log and its last lines
		"<b>benchmark:</b> benchmark step failed: srun returned non-zero exit status 1", "log <code>b1/benchmark.log</code>",
		"RuntimeError: CUDA error: out of memory</pre>",
		"<b>—:</b> no execution of this shard is in the artifacts",
		// a shard with no ok row never looks complete: its bar's ok part is what was ok
		`<span class="ok" style="width: 33.3%"></span><span class="unsupported" style="width: 0.0%"></span><span class="error" style="width: 66.7%"></span>`,
		"<td>gemm</td><td>vllm on h200 ×1</td><td class=\"n\">3</td><td class=\"n\">2</td><td class=\"n\">1</td><td class=\"n\">0</td><td class=\"n\">41.50 µs</td><td class=\"n\">80.88 µs</td><td class=\"n\">120.2 µs</td><td class=\"n\">986.1 TFLOP/s</td>",
		"RuntimeError: CUDA error: &lt;out of memory&gt; &amp; more", // grouped, escaped
		"vllm has no fp8 gemm on this image",
		"0123456789abcdef0123456789abcdef01234567", "sha256:" + strings.Repeat("a", 64), "h200-node-01", "20261201T000000Z-b200-abcde",
		"default-src 'none'",
		// the cases as data: dictionaries and columns, the cases' own as columns too
		`"cases":{"tl":["gemm_perf"],"ol":["gemm"],"t":[0,0,0],"o":[0,0,0],"a":["m=64 n=4096 k=4096 a=bf16 b=bf16 out=bf16",`,
		`"x":[2.147e+09,8.59e+09,2.147e+09],"i":[62.06,227.6,null]}`,
		// the missing cases are rows of their own ("missing", status 4), on their series
		`"series":["vllm on h200 ×1","sglang on b200 ×1","vllm on mi355x ×1"]`, `"thrName":{"gemm":"tflops"}`, `"lat":[41.5,120.2,null,30.1,null,null,null,null,null]`,
		`"st":[0,0,1,0,2,2,4,4,4]`, `<option value="4">missing</option>`,
		`"spread":[[0,40.9,43.2],[1,118,125.5],[3,29.5,31]]`,
		// the node's fingerprint, and the rows measured on its throttled GPU
		"<td>b200-node-01</td><td>2 × NVIDIA B200</td><td>570.86.15</td><td>CUDA 12.8</td><td>1000 W</td><td>1965 MHz</td>",
		`<td class="error">GPU 0: sw_power_cap</td>`, "40 °C → 81 °C", "enroot 4.1.2 · pyxis 0.24.0",
		"1 shard(s) ran on a throttled GPU", `<div class="tv">3</div><div class="tl">Rows on a throttled GPU</div>`, `"throttled":[3,4,5]`,
		// the case ledger and what it cost
		`<div class="tv">3 / 9</div><div class="tl">Cases measured</div>`, `<div class="tv">1</div><div class="tl">Cases unsupported</div>`,
		"Cases still needing a row (5)",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page, "stale attempt") {
		t.Error("the older attempt's rows leaked into the page")
	}
	if n := strings.Count(page, "<td class=\"n\">2</td><td><pre>RuntimeError"); n != 1 {
		t.Errorf("the two identical errors must be one group of 2 (%d)", n)
	}
	for _, re := range []string{`(?i)<link\b`, `(?i)\bsrc="http`, `(?i)href="http`, `(?i)@import`, `url\(`} {
		if regexp.MustCompile(re).MatchString(page) {
			t.Errorf("page refers outside itself: %s", re)
		}
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Error("html/template rejected a value (ZgotmplZ)")
	}
}

func TestReportInHeadlessChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	dir := fixture(t)
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, render(t, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "report.png")
	dom, console := testenv.OpenInChromium(t, bin, page, shot)
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Error("the page's script did not run to the end")
	}
	// the script drew the table's first page, the charts and the comparison
	for _, want := range []string{"failed: 3 of 9 cases measured, 1 unsupported, 2 error, 3 missing", "benchmark step failed", "rows 1–9 of 9",
		`<td class="n">41.50 µs</td>`, "40.90 µs – 43.20 µs", "829.1 TFLOP/s", "gemm on b200: latency", "gemm on h200: tflops",
		"1 case(s) in common: 1 faster, 0 slower (beyond 2 %); geometric mean 1.38x faster"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if n := strings.Count(dom, "<canvas"); n != 6 { // latency and throughput for h200 and b200, and their rooflines
		t.Errorf("%d charts, want 6", n)
	}
	// m=64 n=4096 k=4096 bf16 in 41.5 µs on an H200: 51.74 TFLOP/s at 62.06 FLOP/B, under
	// the memory roof (62.06 x 4.8 TB/s = 297.9 TFLOP/s): 17.37 % of its limit
	for _, want := range []string{`aria-label="h200 (h200) roofline"`, `aria-label="b200 (b200) roofline"`, "<td class=\"n\">17.37 %</td>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	shotPNG, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shotPNG))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// the charts were drawn: the screenshot holds points in the first two series' colours
	for _, c := range []color.RGBA{{0x25, 0x63, 0xeb, 0xff}, {0xdc, 0x26, 0x26, 0xff}} {
		if !hasColour(img, c) {
			t.Errorf("no pixel of %v in the screenshot: a series was not drawn", c)
		}
	}
	png := shotPNG
	if d := os.Getenv("OPX_REPORT_SHOT_DIR"); d != "" { // keep it for a look
		_ = os.WriteFile(filepath.Join(d, "report.png"), png, 0o644)
	}
}

// The console check can fail: a page with a script error is caught.
func TestHeadlessChromiumCatchesConsoleErrors(t *testing.T) {
	bin := testenv.Chromium(t)
	page := filepath.Join(t.TempDir(), "broken.html")
	if err := os.WriteFile(page, []byte(`<!doctype html><title>x</title><p>x</p><script>nosuchfunction();</script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, console := testenv.OpenInChromium(t, bin, page, filepath.Join(t.TempDir(), "x.png"))
	if len(console) == 0 || !strings.Contains(strings.Join(console, "\n"), "nosuchfunction") {
		t.Fatalf("a script error went unnoticed: %q", console)
	}
}

func hasColour(img image.Image, c color.RGBA) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B {
				return true
			}
		}
	}
	return false
}

// A row above its hardware's limit is impossible: counted in a tile, listed in the data,
// flagged in the table.
func TestReportFlagsImpossibleRows(t *testing.T) {
	args, _ := summary.ParseArgs([]byte(`{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`))
	row := func(lat float64) results.Row {
		return results.Row{Shard: "s", Testlist: "t", OpType: "gemm", Backend: "vllm", Cluster: "h100_dgxc_8x", Runner: "cluster:h100-dsxe",
			WorldSize: 1, Args: args, ArgsLabel: "m=4096", Status: "ok", Metrics: map[string]float64{"latency_us": lat},
			MetricOrder: []string{"latency_us"}}
	}
	run := &results.Run{Summary: &summary.Report{}}
	html := renderRun(t, run, []results.Row{row(412), row(10)})
	page := html + pageData(t, html)
	for _, want := range []string{`<div class="tv">1</div><div class="tl">Impossible rows</div>`, `"impossible":[1]`,
		`"peaks":{"h100":{"tflops":{"bf16":989,"fp8":1979},"hbm":3.35}}`, `"sol":[29.51,1216]`, "1 row(s) are impossible."} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// pageData is the JSON the page's script draws, inflated from its opx-data element (a JSON
// string of base64 of gzip), checked to be one JSON object.
func pageData(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<script type="application/json" id="opx-data">`)
	text, _, ok2 := strings.Cut(rest, "</script>")
	var packed string
	if !ok || !ok2 || json.Unmarshal([]byte(text), &packed) != nil {
		t.Fatalf("no opx-data string in the page")
	}
	gz, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the page's data is not a JSON object: %v", err)
	}
	return string(data)
}

// The page's data is made on every core under the caller's context: a report interrupted
// stops there.
func TestReportStopsWithItsContext(t *testing.T) {
	stopped, stop := context.WithCancel(t.Context())
	stop()
	if err := newBuilder().write(stopped, io.Discard, &results.Run{}); !errors.Is(err, context.Canceled) {
		t.Errorf("write with its context cancelled: %v", err)
	}
}

// Every tile agrees with the verdict: on a failed run (the fixture's: one shard failed,
// one missing) no tile is green, whatever its own figure; the shards that measured are
// the ones counted as succeeded.
func TestTilesFollowTheVerdict(t *testing.T) {
	dir := fixture(t)
	out := filepath.Join(t.TempDir(), "r.html")
	if _, err := WriteFile(context.Background(), out, filepath.Join(dir, "operatorx-manifest.json"), dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	page := string(b)
	if !strings.Contains(page, `<h1 class="bad"`) && !strings.Contains(page, "failed:") {
		t.Fatalf("the fixture's run should fail")
	}
	if strings.Contains(page, `class="tile good"`) {
		t.Errorf("a green tile on a failed run")
	}
	if !strings.Contains(page, `<div class="tv">1 / 3</div><div class="tl">Shards succeeded</div>`) {
		t.Errorf("shards succeeded is not the one that measured")
	}
}
