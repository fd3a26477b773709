package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// artifactTree builds a manifest of five shards and a tree of shard artifacts covering the
// summarize cases: a newer attempt that wins over an older one, a missing shard, a failed
// benchmark (error rows), a shard with rows but no status.json (killed), and a clean one.
func artifactTree(t *testing.T) (manifest, artifacts string, ids []string) {
	t.Helper()
	dir := t.TempDir()
	tl := filepath.Join(dir, "tl")
	os.MkdirAll(tl, 0o755)
	var shapes []string
	for i := 1; i <= 5; i++ {
		shapes = append(shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []}`, 64*i))
	}
	os.WriteFile(filepath.Join(tl, "five.json"), []byte("["+strings.Join(shapes, ",\n")+"]"), 0o644)
	manifest = filepath.Join(dir, "manifest.json")
	r := runOpx(t, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "five", "--world-sizes", "1", "--chunk-size", "1",
		"--run-id", "55", "--attempt", "2", "--source-sha", "cafe", "--testlist-dir", tl, "--out", manifest)
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	var m struct {
		Include []json.RawMessage `json:"include"`
	}
	b, _ := os.ReadFile(manifest)
	json.Unmarshal(b, &m)
	for _, c := range m.Include {
		var cell struct{ ID string }
		json.Unmarshal(c, &cell)
		ids = append(ids, cell.ID)
	}
	artifacts = filepath.Join(dir, "artifacts")
	shardDir := func(name, id, attempt, run, sha string, exit *int, statuses ...string) string {
		d := filepath.Join(artifacts, name)
		os.MkdirAll(filepath.Join(d, "results", "cpu", "local"), 0o755)
		var cell json.RawMessage
		for i, c := range m.Include {
			if ids[i] == id {
				cell = c
			}
		}
		ex, _ := json.Marshal(map[string]any{"cell": cell, "source_sha": sha, "run_id": run, "attempt": attempt, "stage": "/x/.operatorx-0/" + run + "-" + attempt + "-" + id + "-abc"})
		os.WriteFile(filepath.Join(d, "execution.json"), ex, 0o644)
		if exit != nil {
			os.WriteFile(filepath.Join(d, "status.json"), []byte(fmt.Sprintf(`{"exit_code": %d, "slurm_jobs": []}`, *exit)), 0o644)
		}
		// each row is of the shard's one case, and an ok row carries its headline metric:
		// here the seed's rule and the verdict agree (TestSummarizeWhereTheVerdictDiffers
		// has where they do not)
		var c struct {
			Cases []struct {
				Testlist string
				Shape    struct{ Args json.RawMessage }
			}
		}
		json.Unmarshal(cell, &c)
		var rows []string
		for _, s := range statuses {
			rows = append(rows, fmt.Sprintf(`{"testlist": %q, "op": {"type": "gemm", "backend": "cpu", "args": %s}, "metrics": {"latency_us": 12.5}, "status": %q}`,
				c.Cases[0].Testlist, c.Cases[0].Shape.Args, s))
		}
		os.WriteFile(filepath.Join(d, "results", "cpu", "local", "r.json"), []byte(`{"schema_version": "1", "rows": [`+strings.Join(rows, ",")+`]}`), 0o644)
		return d
	}
	zero, one := 0, 1
	shardDir("operatorx-shard-55-1-"+ids[0], ids[0], "1", "55", "cafe", &one, "error")
	shardDir("operatorx-shard-55-2-"+ids[0], ids[0], "2", "55", "cafe", &zero, "ok", "unsupported")
	// ids[1] missing
	shardDir("operatorx-shard-55-2-"+ids[2], ids[2], "2", "55", "cafe", &one, "ok", "error")
	shardDir("operatorx-shard-55-2-"+ids[3], ids[3], "2", "55", "cafe", nil, "ok")
	shardDir("operatorx-shard-55-2-"+ids[4], ids[4], "2", "55", "cafe", &zero, "ok", "ok", "unsupported")
	return manifest, artifacts, ids
}

func seedSummarize(t *testing.T, shared, manifest, artifacts, out string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(shared, "seed", "seedcli"), t.TempDir(), "--", "summarize", "--manifest", manifest, "--artifacts", artifacts, "--out", out)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := testenv.ExitCode(t, err)
	return code, so.String(), se.String()
}

func TestSummarizeMatchesOperatorXCI(t *testing.T) {
	shared := sharedDir(t)
	manifest, artifacts, ids := artifactTree(t)
	seedOut := filepath.Join(t.TempDir(), "seed.json")
	code, stdout, stderr := seedSummarize(t, shared, manifest, artifacts, seedOut)
	opxOut := filepath.Join(t.TempDir(), "opx.json")
	r := runOpx(t, "summarize", "--manifest", manifest, "--artifacts", artifacts, "--out", opxOut)
	if code != 1 || r.code != 1 {
		t.Fatalf("exit: seed %d (%s), opx %d (%s); want 1 and 1", code, stderr, r.code, r.stderr)
	}
	// beyond the seed: one line on stderr, the verdict and the case ledger's account (the
	// killed shard's case is measured, its shard failed; 5 attempts predate accounting.json)
	ledger := filepath.Join(filepath.Dir(opxOut), "operatorx-cases.json")
	if want := "opx summarize: failed: 4 of 5 cases measured, 0 unsupported, 0 error, 1 missing; 3 of 5 shards did not succeed (" + ids[1] + ", " + ids[2] + ", " + ids[3] + "); 0 CPU-hours, 5 attempt(s) with no accounting (their cost unknown); ledger: " + ledger + "\n"; r.stderr != want {
		t.Errorf("opx stderr: %q, want %q", r.stderr, want)
	}
	if _, err := os.Stat(ledger); err != nil {
		t.Errorf("no case ledger: %v", err)
	}
	if r.stdout != stdout {
		t.Errorf("table differs\n opx:\n%s\nseed:\n%s", r.stdout, stdout)
	}
	a, _ := os.ReadFile(opxOut)
	b, _ := os.ReadFile(seedOut)
	if string(a) != string(b) || len(a) == 0 {
		t.Errorf("report differs\n opx: %s\nseed: %s", a, b)
	}
	// the cases are what they claim to be
	for _, want := range []string{"| " + ids[0] + " | success | 1 | 1 | 1 | 0 |", "| " + ids[1] + " | missing | 1 | 0 | 0 | 0 |",
		"| " + ids[2] + " | failed | 1 | 1 | 0 | 1 |", "| " + ids[3] + " | failed | 1 | 1 | 0 | 0 |", "| " + ids[4] + " | success | 1 | 2 | 1 | 0 |"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestSummarizeErrorsMatchOperatorXCI(t *testing.T) {
	shared := sharedDir(t)
	for _, tc := range []struct {
		name   string
		break_ func(artifacts string, ids []string)
		want   string
	}{
		{"provenance", func(a string, ids []string) {
			d := filepath.Join(a, "foreign")
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, "execution.json"), []byte(`{"cell": {"id": "x", "runner": "local"}, "source_sha": "cafe", "run_id": "99", "attempt": "1", "stage": "/s"}`), 0o644)
		}, "artifact provenance does not match the requested run"},
		{"invalid status", func(a string, ids []string) {
			os.WriteFile(filepath.Join(a, "operatorx-shard-55-2-"+ids[4], "results", "cpu", "local", "r.json"), []byte(`{"rows": [{"status": "weird"}]}`), 0o644)
		}, "invalid result status: weird"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest, artifacts, ids := artifactTree(t)
			tc.break_(artifacts, ids)
			out := filepath.Join(t.TempDir(), "seed.json")
			code, _, stderr := seedSummarize(t, shared, manifest, artifacts, out)
			if code != 1 || !strings.HasSuffix(strings.TrimSpace(stderr), "ValueError: "+tc.want) {
				t.Fatalf("seed: exit %d %s", code, stderr)
			}
			opxOut := filepath.Join(t.TempDir(), "opx.json")
			r := runOpx(t, "summarize", "--manifest", manifest, "--artifacts", artifacts, "--out", opxOut)
			if r.code != 1 || r.stderr != "opx: "+tc.want+"\n" || r.stdout != "" {
				t.Errorf("opx: exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
			}
			if _, err := os.Stat(opxOut); err == nil {
				t.Error("a report was written on error")
			}
		})
	}
}

// Where the seed crashes with a traceback, opx names the file in one line.
func TestSummarizeBadResults(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{`{"schema_version": "1"}`, `r.json: results file has no "rows" list`},
		{`{"rows": [`, `r.json: not a results file`},
	} {
		manifest, artifacts, ids := artifactTree(t)
		os.WriteFile(filepath.Join(artifacts, "operatorx-shard-55-2-"+ids[4], "results", "cpu", "local", "r.json"), []byte(tc.content), 0o644)
		r := runOpx(t, "summarize", "--manifest", manifest, "--artifacts", artifacts, "--out", filepath.Join(t.TempDir(), "o.json"))
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d %q", tc.content, r.code, r.stderr)
		}
	}
}

// Where ci.py's tests look (issue 32): summarize accepts an execution.json without
// "stage", which neither needs, and says the same as ci.py of it.
func TestSummarizeAcceptsAnExecutionWithoutStage(t *testing.T) {
	shared := sharedDir(t)
	manifest, artifacts, ids := artifactTree(t)
	p := filepath.Join(artifacts, "operatorx-shard-55-2-"+ids[4], "execution.json")
	var ex map[string]any
	b, _ := os.ReadFile(p)
	json.Unmarshal(b, &ex)
	delete(ex, "stage")
	b, _ = json.Marshal(ex)
	os.WriteFile(p, b, 0o644)
	seedOut := filepath.Join(t.TempDir(), "seed.json")
	code, stdout, stderr := seedSummarize(t, shared, manifest, artifacts, seedOut)
	r := runOpx(t, "summarize", "--manifest", manifest, "--artifacts", artifacts, "--out", filepath.Join(t.TempDir(), "opx.json"))
	if code != 1 || r.code != 1 || r.stdout != stdout {
		t.Errorf("seed exit %d (%s), opx exit %d (%s)\n opx:\n%s\nseed:\n%s", code, stderr, r.code, r.stderr, r.stdout, stdout)
	}
}
