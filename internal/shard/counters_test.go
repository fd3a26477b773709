package shard_test

// Counters mode end to end on the local runner: no GPU or profiler runs here, so recording
// fakes stand in for Nsight Compute's ncu and for rocprofv3 (testdata/fake-ncu,
// testdata/fake-rocprofv3). Each checks the command line opx rank gives it, records it,
// runs the harness it wraps (opx's cpu backend), and writes its output files in the real
// tool's format: ncu's CSV, rocprofv3's per-pass CSVs. Then report and export must show
// the counters joined to their cases, and compare must leave the profiled rows out.

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/manifest"
)

func TestCountersModeJoinsKernelsToCases(t *testing.T) {
	for _, tool := range []string{"ncu", "rocprofv3"} {
		t.Run(tool, func(t *testing.T) {
			dir := t.TempDir()
			fakes := filepath.Join(dir, "fakes")
			os.MkdirAll(fakes, 0o755)
			src, _ := filepath.Abs(filepath.Join("testdata", "fake-"+tool))
			os.Symlink(src, filepath.Join(fakes, tool))
			callLog := filepath.Join(dir, "calls")
			env := append(os.Environ(), "PATH="+fakes+":"+os.Getenv("PATH"), "OPX_FAKE_LOG="+callLog)
			run := func(args ...string) outcome {
				cmd := exec.Command(opxBin, args...)
				cmd.Env = env
				return run(cmd)
			}
			m := filepath.Join(dir, "operatorx-manifest.json")
			if r := run("plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--out", m); r.code != 0 {
				t.Fatalf("plan: %s", r.stderr)
			}
			// the cpu backend has no kernels to profile, so plan refuses counters mode for it:
			// the cell is switched by hand, its id unchanged (execute looks it up by id)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, []byte(strings.Replace(string(b), `"mode": "timing"`, `"mode": "counters"`, 1)), 0o644)
			plan, err := manifest.Load(t.Context(), m)
			if err != nil || len(plan.Cells) != 1 || plan.Cells[0].Mode != "counters" {
				t.Fatalf("manifest: %v", err)
			}
			id := plan.Cells[0].ID
			out := filepath.Join(dir, "shards", id)
			if r := run("execute", "--manifest", m, "--shard", id, "--run-id", "local", "--attempt", "1", "--source-sha", "unknown",
				"--runner-name", "t", "--time-minutes", "5", "--cleanup-seconds", "10", "--output", out); r.code != 0 {
				t.Fatalf("execute: exit %d %s", r.code, r.stderr)
			}
			calls, _ := os.ReadFile(callLog)
			switch tool {
			case "ncu":
				if !strings.Contains(string(calls), "--print-nvtx-rename kernel") || !strings.Contains(string(calls), "OPERATORX_PROFILE=1 OPERATORX_PROFILE_MARKERS=1") {
					t.Errorf("ncu calls: %s", calls)
				}
			case "rocprofv3":
				if n := strings.Count(string(calls), "rocprofv3 --pmc "); n != 12 || !strings.Contains(string(calls), "--pmc FETCH_SIZE --kernel-trace --marker-trace --output-format csv -d ") {
					t.Errorf("rocprofv3: %d passes: %s", n, calls)
				}
			}
			r := run("export", dir, "--format", "csv")
			if r.code != 0 {
				t.Fatalf("export: %s", r.stderr)
			}
			recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
			if err != nil || len(recs) != 7 {
				t.Fatalf("export: %v, %d records", err, len(recs))
			}
			col := map[string]int{}
			for i, h := range recs[0] {
				col[h] = i
			}
			get := func(i int, name string) string { return recs[i][col[name]] }
			wantTime, wantL2 := "12.5", "75"
			if tool == "rocprofv3" {
				wantTime = "20"
			}
			ok := 0
			for i := 1; i < len(recs); i++ {
				switch get(i, "status") {
				case "ok":
					ok++
					if get(i, "counter_source") != tool || get(i, "counter_kernels") != "1" || get(i, "kernel_time_us") != wantTime ||
						get(i, "l2_hit_pct") != wantL2 || get(i, "measured_vs_declared_bytes") == "" {
						t.Errorf("row %d: %v", i, recs[i])
					}
				case "unsupported":
					if get(i, "counter_source") != "" || get(i, "counter_note") != "the op did not run (unsupported)" {
						t.Errorf("unsupported row %d: %v", i, recs[i])
					}
				}
			}
			// the fakes move 256 KiB an op (1 KiB read for op 1): op 0 (128³ fp32, 192 KiB of
			// operands and output) moved all of it; ops 1-3 (1.5 MiB, 6 MiB, 32 MiB) far less:
			// timed on cached data
			cached := "moved less than half its operands' bytes: timed on cached data"
			if ok != 4 || get(1, "counter_note") != "" || get(2, "counter_note") != cached || get(3, "counter_note") != cached || get(4, "counter_note") != cached {
				t.Errorf("ok rows %d; notes %q %q %q %q", ok, get(1, "counter_note"), get(2, "counter_note"), get(3, "counter_note"), get(4, "counter_note"))
			}
			if r := run("report", dir); r.code != 0 {
				t.Fatalf("report: %s", r.stderr)
			}
			page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
			for _, want := range []string{`<section id="counters">`, "4 of 6 case(s) have counters.", "3 moved less than half the bytes of their operands and output"} {
				if !strings.Contains(string(page), want) {
					t.Errorf("report lacks %q", want)
				}
			}
			// its timing is the profiler's: compare leaves its rows out, and says it has
			// nothing measured to compare
			if r := run("compare", dir, dir, "--allow-same"); r.code != 1 || !strings.Contains(r.stdout, "**0 cases:** no cases.") ||
				!strings.Contains(r.stderr, "new: nothing measured to compare (6 rows in the run, 6 of them profiled (counters mode: timed by the profiler, left out); 0 unsupported, 0 error)") {
				t.Errorf("compare of a counters run: exit %d %s %s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
