package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ci.py's own tests (operatorx/tests/test_ci.py upstream) feed summarize and recover the
// minimal artifacts ci.py accepts; each case is rebuilt here and run black-box through the
// seed's command line and opx's, beside each other.

// writeJSONFile writes v as JSON at path, making its directory.
func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// test_summary_uses_latest_attempt_and_reports_missing_coverage: cells of only an id and
// cases without shapes, executions whose cell is only an id, rows of only a status. opx
// writes ci.py's report byte for byte and prints its table, exits as it does, and says
// by which rule it judged (the cases could not be keyed); an artifact of another source
// is refused by both with the same message.
func TestUpstreamSummarizeCase(t *testing.T) {
	shared := sharedDir(t)
	dir := t.TempDir()
	manifest := map[string]any{"run_id": "12", "source_sha": "abc",
		"include": []any{map[string]any{"id": "one", "cases": []any{map[string]any{}, map[string]any{}}}, map[string]any{"id": "two", "cases": []any{map[string]any{}}}}}
	writeJSONFile(t, filepath.Join(dir, "manifest.json"), manifest)
	art := filepath.Join(dir, "art")
	for attempt, status := range map[int]string{1: "error", 2: "ok"} {
		root := filepath.Join(art, string(rune('0'+attempt)))
		writeJSONFile(t, filepath.Join(root, "execution.json"), map[string]any{"run_id": "12", "source_sha": "abc", "attempt": string(rune('0' + attempt)), "cell": map[string]any{"id": "one"}})
		code := 1
		if attempt == 2 {
			code = 0
		}
		writeJSONFile(t, filepath.Join(root, "status.json"), map[string]any{"exit_code": code})
		writeJSONFile(t, filepath.Join(root, "results", "run.json"), map[string]any{"rows": []any{map[string]any{"status": status}, map[string]any{"status": "unsupported"}}})
	}
	seedOut, opxOut := filepath.Join(dir, "seed.json"), filepath.Join(dir, "opx.json")
	seedCode, seedStdout, _ := seedSummarize(t, shared, filepath.Join(dir, "manifest.json"), art, seedOut)
	r := runOpx(t, "summarize", "--manifest", filepath.Join(dir, "manifest.json"), "--artifacts", art, "--out", opxOut)
	want, _ := os.ReadFile(seedOut)
	got, _ := os.ReadFile(opxOut)
	if seedCode != 1 || r.code != seedCode || string(got) != string(want) || r.stdout != seedStdout {
		t.Errorf("exit %d (ci.py %d)\nreport:\n%s\nci.py's:\n%s\nstdout:\n%s\nci.py's:\n%s", r.code, seedCode, got, want, r.stdout, seedStdout)
	}
	if !strings.Contains(r.stderr, "judged by ci.py's rule") || !strings.Contains(r.stderr, "could not be keyed (shard one: its cell names no backends)") ||
		strings.Contains(r.stderr, "no case was requested") {
		t.Errorf("the verdict line does not say which rule and why: %q", r.stderr)
	}
	manifest["source_sha"] = "different"
	writeJSONFile(t, filepath.Join(dir, "manifest.json"), manifest)
	seedErr, _ := exec.Command(filepath.Join(shared, "seed", "seedcli"), filepath.Join(shared, "reference"), "--", "summarize",
		"--manifest", filepath.Join(dir, "manifest.json"), "--artifacts", art, "--out", seedOut).CombinedOutput()
	r = runOpx(t, "summarize", "--manifest", filepath.Join(dir, "manifest.json"), "--artifacts", art, "--out", opxOut)
	const msg = "artifact provenance does not match the requested run"
	if r.code != 1 || !strings.Contains(r.stderr, msg) || !strings.Contains(string(seedErr), msg) {
		t.Errorf("another source: exit %d %q; ci.py said %q", r.code, r.stderr, seedErr)
	}
}

// test_recovery_refuses_unrelated_pool_or_storage: an execution of another runner, then
// one whose stage is not the user's, both without a source SHA or attempt — refused in
// ci.py's order with its messages, before the layout is looked at. (ci.py's command line
// takes only its built-in runner labels: the test's labels are two of them.)
func TestUpstreamRecoverCase(t *testing.T) {
	shared := sharedDir(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "shared"), 0o755)
	cfg := filepath.Join(dir, "platforms.json")
	writeJSONFile(t, cfg, map[string]any{"platforms": map[string]any{"cluster:h200-dgxc": map[string]any{"operator": map[string]any{"squash_dir": filepath.Join(dir, "shared", "squash")}}}})
	art := filepath.Join(dir, "artifacts")
	data := map[string]any{"run_id": "12", "cell": map[string]any{"runner": "cluster:b200-nscale"}, "stage": filepath.Join(dir, "unrelated")}
	for _, c := range []struct{ runner, want string }{
		{"cluster:b200-nscale", "recovery artifact does not match requested run/runner"},
		{"cluster:h200-dgxc", "recovery stage does not belong to this runner/user"},
	} {
		data["cell"].(map[string]any)["runner"] = c.runner
		writeJSONFile(t, filepath.Join(art, "execution.json"), data)
		args := []string{"recover", "--artifacts", art, "--run-id", "12", "--runner", "cluster:h200-dgxc", "--platform-config", cfg, "--cleanup-seconds", "2"}
		seedErr, _ := exec.Command(filepath.Join(shared, "seed", "seedcli"), append([]string{filepath.Join(shared, "reference"), "--"}, args...)...).CombinedOutput()
		r := runOpx(t, args...)
		if r.code != 1 || strings.TrimSpace(r.stderr) != "opx: "+c.want || !strings.Contains(string(seedErr), "ValueError: "+c.want) {
			t.Errorf("artifact of runner %s: exit %d %q; ci.py said %q", c.runner, r.code, r.stderr, seedErr)
		}
	}
}

// Where opx falls back to ci.py's rule — inputs ci.py accepts that opx cannot key: cells
// that name no backends (with shapes or without), an execution of a minimal cell whose
// rows carry only a status — every shard's status, counts and the exit code are ci.py's,
// byte for byte, whether the shards succeeded or not.
func TestCiPyFallbackIsCiPys(t *testing.T) {
	shared := sharedDir(t)
	shape := map[string]any{"testlist": "t", "shape": map[string]any{"type": "gemm", "args": map[string]any{"m": 1, "n": 2, "k": 3}}}
	ok, errRow, unsup := map[string]any{"status": "ok"}, map[string]any{"status": "error"}, map[string]any{"status": "unsupported"}
	for name, c := range map[string]struct {
		cell     map[string]any
		attempts [][]any
		codes    []int
	}{
		"shapes, no backends":            {map[string]any{"id": "one", "cases": []any{shape, shape}}, [][]any{{ok, ok}}, []int{0}},
		"empty backends":                 {map[string]any{"id": "one", "backends": []any{}, "cases": []any{map[string]any{}}}, [][]any{{ok}}, []int{0}},
		"status-only rows of a shape":    {map[string]any{"id": "one", "backends": []any{"vllm"}, "cases": []any{shape}}, [][]any{{ok}}, []int{0}},
		"retried, latest succeeded":      {map[string]any{"id": "one", "cases": []any{shape}}, [][]any{{errRow}, {ok, unsup}}, []int{1, 0}},
		"latest failed":                  {map[string]any{"id": "one", "cases": []any{shape}}, [][]any{{ok}, {ok, errRow}}, []int{0, 1}},
		"exited 0 with only unsupported": {map[string]any{"id": "one", "cases": []any{shape}}, [][]any{{unsup}}, []int{0}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeJSONFile(t, filepath.Join(dir, "manifest.json"), map[string]any{"run_id": "12", "source_sha": "abc", "include": []any{c.cell}})
			for i, rows := range c.attempts {
				root := filepath.Join(dir, "art", fmt.Sprint(i+1))
				writeJSONFile(t, filepath.Join(root, "execution.json"), map[string]any{"run_id": "12", "source_sha": "abc", "attempt": fmt.Sprint(i + 1), "cell": map[string]any{"id": "one"}})
				writeJSONFile(t, filepath.Join(root, "status.json"), map[string]any{"exit_code": c.codes[i]})
				writeJSONFile(t, filepath.Join(root, "results", "run.json"), map[string]any{"rows": rows})
			}
			seedOut, opxOut := filepath.Join(dir, "seed.json"), filepath.Join(dir, "opx.json")
			seedCode, seedStdout, _ := seedSummarize(t, shared, filepath.Join(dir, "manifest.json"), filepath.Join(dir, "art"), seedOut)
			r := runOpx(t, "summarize", "--manifest", filepath.Join(dir, "manifest.json"), "--artifacts", filepath.Join(dir, "art"), "--out", opxOut)
			want, _ := os.ReadFile(seedOut)
			got, _ := os.ReadFile(opxOut)
			if r.code != seedCode || string(got) != string(want) || r.stdout != seedStdout || !strings.Contains(r.stderr, "judged by ci.py's rule") {
				t.Errorf("exit %d (ci.py %d)\nreport:\n%s\nci.py's:\n%s\nstderr: %s", r.code, seedCode, got, want, r.stderr)
			}
		})
	}
}
