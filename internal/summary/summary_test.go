package summary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
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

// Every execution of a shard is found, oldest first; the newest is the one counted (its
// rows and how it ended); a shard with none is missing.
func TestSummarizeEachChoosesTheNewestAttempt(t *testing.T) {
	m, a := tree(t, map[string][4]string{"x1": {"a", "1", "7", `{"exit_code": 1}`}, "x2": {"a", " +2 ", "7", `{"exit_code": 0.0}`}})
	files := 0
	rep, err := SummarizeEach(t.Context(), m, a, func(i int, s *Shard, ex Execution, path string, doc *pyjson.Object) error {
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Shards[0]
	if s.Attempt != 2 || !s.Ended || !s.Exited0 || s.OK != 1 || s.Unsupported != 1 || len(s.Executions) != 2 || s.Executions[0].Attempt != 1 || files != 2 {
		t.Errorf("shard a: %+v (%d files)", s, files)
	}
	if b := rep.Shards[1]; b.Status != "missing" || b.HasAttempt {
		t.Errorf("shard b: %+v", b)
	}
	if n := RowsIn(t.Context(), a); n != 4 {
		t.Errorf("RowsIn: %d, want 4", n)
	}
}

func TestSummarizeEachRefusesForeignOrBrokenExecutions(t *testing.T) {
	for _, c := range []struct {
		execs map[string][4]string
		want  string
	}{
		{map[string][4]string{"x": {"a", "1", "8", ""}}, "artifact provenance does not match the requested run"},
		{map[string][4]string{"x": {"a", "one", "7", ""}}, `attempt 'one' is not an integer`},
		{map[string][4]string{"x": {"a", "1", "7", `[1]`}}, "not a status file"},
	} {
		m, a := tree(t, c.execs)
		if _, err := SummarizeEach(t.Context(), m, a, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.execs, err, c.want)
		}
	}
}
