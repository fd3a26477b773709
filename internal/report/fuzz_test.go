package report

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/results"
)

// FuzzResultsFile: any bytes as a shard's results file. Loading never panics and fails
// with one line; when it loads, the full reader sees as many rows as summarize's skimmer
// counted, the page renders, and a run compared with itself has no change in it.
func FuzzResultsFile(f *testing.F) {
	f.Add([]byte(`{"rows": [{"op": {"type": "gemm", "args": {"m": 1}, "backend": "cpu"}, "metrics": {"latency_us": 1.5, "latency_min_us": 1, "latency_max_us": 2, "gflops": 3}, "status": "ok", "testlist": "t"}]}`))
	f.Add([]byte(`{"run": {"id": "x", "software": {"a": 1}}, "rows": [{"status": "error", "message": "<b>&"}, {"status": "unsupported", "op": 3}]}`))
	f.Add([]byte(`{"rows": [{"status": "ok", "metrics": {"latency_us": [1, 2, 3, 4, 5], "latency_us_samples": [1e308, -1e308, 0, 0]}}]}`))
	f.Add([]byte(`{"rows": []}`))
	dir := f.TempDir()
	manifest := filepath.Join(dir, "operatorx-manifest.json")
	cell := `{"id": "s1", "runner": "local", "cluster": "local", "world_size": 1, "cases": [{}]}`
	os.WriteFile(manifest, []byte(`{"include": [`+cell+`], "source_sha": "a", "run_id": "1"}`), 0o644)
	os.MkdirAll(filepath.Join(dir, "s1", "results"), 0o755)
	os.WriteFile(filepath.Join(dir, "s1", "execution.json"), []byte(`{"cell": `+cell+`, "source_sha": "a", "run_id": "1", "attempt": "1", "stage": "/x"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "s1", "status.json"), []byte(`{"exit_code": 0}`), 0o644)
	res := filepath.Join(dir, "s1", "results", "r.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(res, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var run *results.Run
		rows := 0
		err := results.Stream(context.Background(), manifest, dir, func(r *results.Run) { run = r }, func(_ *results.Shard, rs []results.Row) error {
			rows += len(rs)
			return nil
		}, nil)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		s := run.Summary.Shards[0]
		if n := s.OK + s.Unsupported + s.Error; n < rows {
			t.Fatalf("skimmer counted %d rows, the reader kept %d", n, rows)
		}
		if _, err := WriteFile(context.Background(), filepath.Join(t.TempDir(), "r.html"), manifest, dir); err != nil {
			t.Fatalf("render: %v", err)
		}
		side := func() *compare.Run {
			r, err := compare.Read(context.Background(), dir, manifest, nil, nil)
			if err != nil {
				t.Fatalf("compare reads what report read: %v", err)
			}
			return r
		}
		cmp := compare.Join(side(), side(), compare.DefaultOptions)
		for _, c := range []string{compare.Slower, compare.Faster, compare.Broken, compare.Fixed, compare.OnlyBase, compare.OnlyNew} {
			if cmp.Counts[c] > 0 {
				t.Fatalf("a run compared with itself has %d %s", cmp.Counts[c], c)
			}
		}
	})
}
