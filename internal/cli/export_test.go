package cli

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// export writes one flat record per row: the fixed columns, then every metric (CSV) or a
// metrics object (JSON lines); bad input is one line.
func TestExportCommand(t *testing.T) {
	run := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}, 2: {-1}, 3: {50, 49, 51}})
	r := runOpx(t, "export", run, "--format", "csv")
	if r.code != 0 {
		t.Fatalf("export csv: exit %d %s", r.code, r.stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("csv: %v, %d records\n%s", err, len(recs), r.stdout)
	}
	head := strings.Join(recs[0], ",")
	if head != "key,shard,attempt,run_id,source_sha,started_at,host,testlist,op_type,args,args_label,backend,cluster,runner,world_size,status,message,tries,gpu_seconds,throttled,contended,flops,bytes,achieved_tflops,achieved_tbps,pct_of_compute_peak,pct_of_bandwidth_peak,intensity,bound,pct_of_roofline,impossible,work_source,formula_diff_pct,counter_source,counter_kernels,kernel_time_us,dram_read_bytes,dram_write_bytes,l2_hit_pct,tensor_pct,busy_pct,measured_vs_declared_bytes,counter_note,latency_us,latency_min_us,latency_max_us,gflops" {
		t.Errorf("header %s", head)
	}
	col := func(rec []string, name string) string {
		for i, h := range recs[0] {
			if h == name {
				return rec[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	if first := recs[1]; col(first, "args_label") != "m=1 n=64 k=64 a=fp32 b=fp32 out=fp32" || col(first, "latency_us") != "100" ||
		col(first, "attempt") != "1" || col(first, "run_id") != "100" || col(first, "source_sha") != "abc" || col(first, "world_size") != "1" || col(first, "status") != "ok" ||
		!strings.HasPrefix(col(first, "key"), "t | gemm | {") {
		t.Errorf("first record %q", first)
	}
	if e := recs[2]; col(e, "status") != "error" || col(e, "message") != "boom" || col(e, "latency_us") != "" {
		t.Errorf("error record %q", e)
	}

	out := filepath.Join(t.TempDir(), "cases.jsonl")
	if r := runOpx(t, "export", run, "--format", "jsonl", "--out", out); r.code != 0 || r.stdout != "" {
		t.Fatalf("export jsonl: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rec struct {
		Key     string
		Args    map[string]any
		Metrics map[string]float64
		Status  string
	}
	if len(lines) != 3 || json.Unmarshal([]byte(lines[2]), &rec) != nil || rec.Metrics["latency_us"] != 50 || rec.Args["m"] != 3.0 {
		t.Errorf("jsonl: %d lines, last %+v\n%s", len(lines), rec, b)
	}
	// a case no attempt wrote a row for is exported too, as missing: drop the last row
	rf := filepath.Join(run, "shards", "s1", "results", "cpu", "local", "r.json")
	doc, _ := os.ReadFile(rf)
	i := strings.LastIndex(string(doc), `, {"op"`)
	os.WriteFile(rf, []byte(string(doc[:i])+"]}"), 0o644)
	r = runOpx(t, "export", run, "--format", "csv")
	recs, err = csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("csv with a missing case: %v, %d records\n%s", err, len(recs), r.stdout)
	}
	if m := recs[3]; col(m, "status") != "missing" || col(m, "attempt") != "0" || col(m, "args_label") != "m=3 n=64 k=64 a=fp32 b=fp32 out=fp32" ||
		col(m, "runner") != "local" || col(m, "latency_us") != "" || !strings.HasPrefix(col(m, "key"), "t | gemm | {") {
		t.Errorf("missing record %q", m)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", run, "--format", "xml"}, 2, "--format xml: one of csv, jsonl"},
		{[]string{"export", filepath.Join(run, "nope")}, 1, "run directory " + filepath.Join(run, "nope") + ": not found"},
	} {
		r := runOpx(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want %d %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
