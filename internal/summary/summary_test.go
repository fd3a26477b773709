package summary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/manifest"
)

// tree writes a manifest of two one-shape shards and executions of them under artifacts:
// each given as dir -> (shard, attempt text, run id, status.json text or "").
func tree(t *testing.T, execs map[string][4]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cell := func(id string) string {
		return `{"id": "` + id + `", "runner": "local", "cluster": "local", "world_size": 1, "backends": ["cpu"], "cases": [{"testlist": "t", "shape": {"type": "gemm", "args": {"m": 1}}}]}`
	}
	manifest := filepath.Join(dir, "m.json")
	os.WriteFile(manifest, []byte(`{"include": [`+cell("a")+`, `+cell("b")+`], "source_sha": "s", "run_id": "7"}`), 0o644)
	for d, e := range execs {
		p := filepath.Join(dir, "art", d)
		os.MkdirAll(filepath.Join(p, "results"), 0o755)
		os.WriteFile(filepath.Join(p, "execution.json"), []byte(`{"cell": `+cell(e[0])+`, "source_sha": "s", "run_id": "`+e[2]+`", "attempt": "`+e[1]+`", "stage": "/x"}`), 0o644)
		if e[3] != "" {
			os.WriteFile(filepath.Join(p, "status.json"), []byte(e[3]), 0o644)
		}
		os.WriteFile(filepath.Join(p, "results", "r.json"), []byte(`{"rows": [{"status": "ok"}, {"status": "unsupported"}]}`), 0o644)
	}
	return manifest, filepath.Join(dir, "art")
}

// Every execution of a shard is found, oldest first, each with its execution.json; the
// newest is the one counted; a shard with none is missing. Results hands on each results
// file and Ended says how the counted execution ended.
func TestFindChoosesTheNewestAttempt(t *testing.T) {
	m, a := tree(t, map[string][4]string{"x1": {"a", "1", "7", `{"exit_code": 1}`}, "x2": {"a", " +2 ", "7", `{"exit_code": 0.0}`}})
	rep, err := Find(t.Context(), m, a)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Shards[0]
	if s.Attempt != 2 || !s.HasAttempt || len(s.Executions) != 2 || s.Executions[0].Attempt != 1 || s.Executions[1].Head == nil || s.Executions[1].Head.RunID != "7" {
		t.Errorf("shard a: %+v", s)
	}
	if b := rep.Shards[1]; b.Status != "missing" || b.HasAttempt {
		t.Errorf("shard b: %+v", b)
	}
	files := 0
	if err := Results(t.Context(), s.Dir, OnlyStatuses, func(path string, f *ResultsFile) error { files++; return nil }); err != nil || files != 1 {
		t.Errorf("Results: %v, %d files", err, files)
	}
	if st, err := manifest.ReadStatus(t.Context(), filepath.Join(s.Dir, manifest.StatusFile)); err != nil || st == nil || !st.Exited0 {
		t.Errorf("status: %+v %v", st, err)
	}
	if n := RowsIn(t.Context(), a); n != 4 {
		t.Errorf("RowsIn: %d, want 4", n)
	}
}

func TestFindRefusesForeignOrBrokenExecutions(t *testing.T) {
	for _, c := range []struct {
		execs map[string][4]string
		want  string
	}{
		{map[string][4]string{"x": {"a", "1", "8", ""}}, "artifact provenance does not match the requested run"},
		{map[string][4]string{"x": {"a", "one", "7", ""}}, `attempt 'one' is not an integer`},
		{map[string][4]string{"x": {"a", "1", "7", ""}, "y": {"b", "1", "9", ""}}, "artifact provenance does not match the requested run"},
	} {
		m, a := tree(t, c.execs)
		if _, err := Find(t.Context(), m, a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.execs, err, c.want)
		}
	}
}
