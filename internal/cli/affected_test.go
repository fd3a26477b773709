package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// opx plan --affected-by plans only what a change touches: a pull request that edits one
// testlist plans that testlist's cases alone, says why, and one that edits nothing the
// selection holds writes no manifest.
func TestPlanAffectedBy(t *testing.T) {
	dir := t.TempDir()
	git := testenv.Git(t, dir)
	os.MkdirAll(filepath.Join(dir, "testlists"), 0o755)
	for _, f := range []string{"testlists/gemm_perf.json", "testlists/smoke_parallel.json", "testlists/attention_perf.json", "containers.toml"} {
		b, err := os.ReadFile(filepath.Join("../catalog/data", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-qm", "base")
	git("checkout", "-q", "-b", "pr")
	b, _ := os.ReadFile(filepath.Join(dir, "testlists/gemm_perf.json"))
	os.WriteFile(filepath.Join(dir, "testlists/gemm_perf.json"), append(b, '\n'), 0o644)
	git("commit", "-qam", "gemm")
	git("checkout", "-q", "-b", "other", "main")
	b, _ = os.ReadFile(filepath.Join(dir, "testlists/attention_perf.json"))
	os.WriteFile(filepath.Join(dir, "testlists/attention_perf.json"), append(b, '\n'), 0o644)
	git("commit", "-qam", "attention")
	plan := func(rng, out string) (int, string) {
		var so, se bytes.Buffer
		code := Main(context.Background(), []string{"plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf,smoke_parallel",
			"--world-sizes", "1,2", "--testlist-dir", filepath.Join(dir, "testlists"), "--containers", filepath.Join(dir, "containers.toml"),
			"--affected-by", rng, "--affected-repo", dir, "--out", out}, Env{Stdin: strings.NewReader(""), Stdout: &so, Stderr: &se, Getenv: func(string) string { return "" }, Environ: func() []string { return nil }})
		return code, se.String()
	}
	out := filepath.Join(t.TempDir(), "m.json")
	code, msg := plan("main..pr", out)
	if code != 0 || !strings.Contains(msg, "--affected-by main..pr: testlist gemm_perf: testlists/gemm_perf.json changed") {
		t.Fatalf("exit %d\n%s", code, msg)
	}
	var m struct {
		Include []struct {
			Cases []struct{ Testlist string } `json:"cases"`
		} `json:"include"`
	}
	b, _ = os.ReadFile(out)
	json.Unmarshal(b, &m)
	var lists []string
	for _, c := range m.Include {
		for _, k := range c.Cases {
			if !slices.Contains(lists, k.Testlist) {
				lists = append(lists, k.Testlist)
			}
		}
	}
	if !slices.Equal(lists, []string{"gemm_perf"}) {
		t.Errorf("the manifest plans %v, want gemm_perf alone", lists)
	}
	// as a workflow runs it: in the repository, its paths relative (the defaults)
	t.Chdir(dir)
	var so, se bytes.Buffer
	rel := filepath.Join(t.TempDir(), "rel.json")
	code = Main(context.Background(), []string{"plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf,smoke_parallel",
		"--world-sizes", "1,2", "--testlist-dir", "testlists", "--containers", "./containers.toml", "--affected-by", "main..pr", "--out", rel},
		Env{Stdin: strings.NewReader(""), Stdout: &so, Stderr: &se, Getenv: func(string) string { return "" }, Environ: func() []string { return nil }})
	if code != 0 || !strings.Contains(se.String(), "testlist gemm_perf: testlists/gemm_perf.json changed") || strings.Contains(se.String(), "every case") {
		t.Errorf("relative paths in the repository: exit %d\n%s", code, se.String())
	}
	none := filepath.Join(t.TempDir(), "none.json")
	if code, msg := plan("main..other", none); code != 0 || !strings.Contains(msg, "touches none of the selected cases") {
		t.Errorf("a change to another testlist: exit %d\n%s", code, msg)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a manifest was written for a change that touches nothing: %v", err)
	}
}
