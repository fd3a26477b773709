package resume

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run writes a one-shard run of three shapes on the cpu backend and its attempt 1: shape
// 0 ok, shape 1 an error, shape 2 no row; status is status.json's text ("" for none).
func run(t *testing.T, status string) (manifest, artifacts string) {
	t.Helper()
	dir := t.TempDir()
	var cases, rows []string
	for m := range 3 {
		args := fmt.Sprintf(`{"m": %d, "n": 8, "k": 8, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}`, m+1)
		cases = append(cases, fmt.Sprintf(`{"testlist": "t", "shape": {"type": "gemm", "args": %s, "sources": []}}`, args))
		row := `{"testlist": "t", "op": {"type": "gemm", "backend": "cpu", "args": %s}, "metrics": {"latency_us": 5}, "status": "ok"}`
		switch m {
		case 1:
			row = `{"testlist": "t", "op": {"type": "gemm", "backend": "cpu", "args": %s}, "metrics": {}, "status": "error", "message": "boom"}`
		case 2:
			continue
		}
		rows = append(rows, fmt.Sprintf(row, args))
	}
	cell := `{"id": "s1", "runner": "local", "cluster": "local", "world_size": 1, "image": "", "backends": ["cpu"], "cases": [` + strings.Join(cases, ", ") + `]}`
	manifest = filepath.Join(dir, "operatorx-manifest.json")
	os.WriteFile(manifest, []byte(`{"version": 1, "include": [`+cell+`], "source_sha": "abc", "run_id": "9", "attempt": "1"}`), 0o644)
	artifacts = filepath.Join(dir, "shards")
	sd := filepath.Join(artifacts, "s1")
	os.MkdirAll(filepath.Join(sd, "results"), 0o755)
	os.WriteFile(filepath.Join(sd, "execution.json"), []byte(`{"cell": `+cell+`, "source_sha": "abc", "run_id": "9", "attempt": "1", "stage": "/x"}`), 0o644)
	if status != "" {
		os.WriteFile(filepath.Join(sd, "status.json"), []byte(status), 0o644)
	}
	os.WriteFile(filepath.Join(sd, "results", "r.json"), []byte(`{"rows": [`+strings.Join(rows, ", ")+`]}`), 0o644)
	return manifest, artifacts
}

// Only the shapes with a case not done are rerun, each with why, in attempt 2 of the same
// run and shard.
func TestMakeRerunsWhatIsNotDone(t *testing.T) {
	for _, c := range []struct {
		status, missing string
	}{
		{`{"exit_code": 0}`, "missing: attempt 1 finished without a row for it"},
		{"", "missing: attempt 1 ended before it (killed: no status.json)"},
		{`{"exit_code": 1, "failure": {"phase": "benchmark", "message": "srun exited 1"}}`, "missing: attempt 1 ended before it (benchmark: srun exited 1)"},
		{`{"exit_code": 1}`, "missing: attempt 1 ended before it (failed)"},
	} {
		m, a := run(t, c.status)
		p, err := Make(t.Context(), m, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Attempt != 2 || p.Cells != 1 || p.Shapes != 2 || len(p.Reasons) != 2 {
			t.Fatalf("%s: attempt %d, %d cells, %d shapes, reasons %+v", c.status, p.Attempt, p.Cells, p.Shapes, p.Reasons)
		}
		if r := p.Reasons[0]; r.Shard != "s1" || !strings.Contains(r.Key, `"m": 2`) || r.Why != "error in attempt 1: boom" {
			t.Errorf("the error's reason: %+v", r)
		}
		if r := p.Reasons[1]; !strings.Contains(r.Key, `"m": 3`) || r.Why != c.missing {
			t.Errorf("%s: the missing case's reason %q, want %q", c.status, r.Why, c.missing)
		}
		if v, _ := p.Manifest.Get("attempt"); v != "2" {
			t.Errorf("the manifest's attempt %v", v)
		}
	}
	m, a := run(t, `{"exit_code": 0}`)
	if _, err := Make(t.Context(), m, a, 1); err == nil || !strings.Contains(err.Error(), "attempt 1 is not after the newest attempt found (1)") {
		t.Errorf("an attempt that is not new: %v", err)
	}
}
