package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sharedDir finds ../shared beside the repository (the seed and reference data); tests
// that need it skip when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("OPX_SHARED"); d != "" {
		return d
	}
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(dir, "..", "shared")
			if _, err := os.Stat(filepath.Join(s, "seed", "seedcli")); err == nil {
				return s
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Skip("OperatorX CI (ci.py) not found under ../shared: the differential tests compare with it")
	return ""
}

func repoRoot(t testing.TB) string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

const pinnedContainers = `[nvidia.vllm]
image = "vllm/vllm-openai:nightly-cd10ed6f@sha256:20a52b807cef7a3be15d2174d293b5642d437615b20b5930d78a927e709e6bb6"

[nvidia.torch]
image = "nvcr.io/nvidia/pytorch:26.03-py3@sha256:1111111111111111111111111111111111111111111111111111111111111111"

[amd.torch]
image = "vllm/vllm-openai-rocm:v0.19.0@sha256:2222222222222222222222222222222222222222222222222222222222222222"

[amd.vllm]
image = "docker.io/rocm/vllm:nightly@sha256:3333333333333333333333333333333333333333333333333333333333333333"
`

// seedFixture lays out a reference dir the seed can run against (the embedded testlists,
// a pinned containers.toml) and the embedded platform overlay with its base.
func seedFixture(t *testing.T) (ref, platforms string) {
	t.Helper()
	root := repoRoot(t)
	ref = t.TempDir()
	tl := filepath.Join(ref, "testlists")
	os.MkdirAll(tl, 0o755)
	src := filepath.Join(root, "internal/catalog/data")
	entries, _ := os.ReadDir(filepath.Join(src, "testlists"))
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, "testlists", e.Name()))
		os.WriteFile(filepath.Join(tl, e.Name()), b, 0o644)
	}
	os.WriteFile(filepath.Join(ref, "containers.toml"), []byte(pinnedContainers), 0o644)
	cfg := t.TempDir()
	for _, f := range []string{"platforms.json", "platform_config.json"} {
		b, _ := os.ReadFile(filepath.Join(src, f))
		os.WriteFile(filepath.Join(cfg, f), b, 0o644)
	}
	return ref, filepath.Join(cfg, "platforms.json")
}

type result struct {
	code           int
	stdout, stderr string
}

func runOpx(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: os.Getenv, Environ: os.Environ})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestPlanMatchesOperatorXCI runs the seed's own command line and opx on the same inputs and
// compares the manifest and the matrix byte for byte.
func TestPlanMatchesOperatorXCI(t *testing.T) {
	shared := sharedDir(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	ref, platforms := seedFixture(t)
	selections := [][]string{
		{"--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf,smoke_parallel", "--world-sizes", "1,2,4,8", "--chunk-size", "3"},
		{"--runner", "cluster:mi355x-amds", "--backends", "vllm", "--testlists", "smoke_parallel,gemm_perf,gemm_serving_8k1k_min", "--world-sizes", " 1,+2,4,0_8", "--chunk-size", "2"},
		{"--runner", "cluster:gb200-nv", "--backends", "vllm", "--testlists", "gemm_serving_8k1k_min", "--world-sizes", "1,4", "--chunk-size", "500", "--mode", "counters"},
		{"--runner", "cluster:h100-dsxe", "--backends", "torch", "--testlists", "profile_subset", "--world-sizes", "1", "--chunk-size", "4"},
		{"--runner", "cluster:b300-dsxe", "--backends", "vllm,torch", "--testlists", "gemm_perf,gemm_perf_legacy", "--world-sizes", "1", "--chunk-size", "5"},
		{"--runner", "cluster:h100-dsxe", "--backends", "vllm", "--testlists", "moe_subset_legacy,attention_perf", "--world-sizes", "1", "--chunk-size", "100"},
		{"--runner", "cluster:gb300-nv", "--backends", "vllm", "--testlists", "gemm_legacy", "--world-sizes", "1", "--chunk-size", "500"},
		{"--runner", "cluster:mi300x-amd", "--backends", "torch", "--testlists", "gemm_perf", "--world-sizes", "1", "--chunk-size", "1"},
	}
	for i, sel := range selections {
		common := append(append([]string{}, sel...), "--run-id", "12", "--attempt", "1", "--source-sha", "abc123", "--platform-config", platforms)
		seedOut := filepath.Join(t.TempDir(), "seed.json")
		cmd := exec.Command(filepath.Join(shared, "seed", "seedcli"), append([]string{ref, "--", "plan", "--out", seedOut}, common...)...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("selection %d: seed failed: %v\n%s", i, err, se.String())
		}
		mine := filepath.Join(t.TempDir(), "opx.json")
		r := runOpx(t, append([]string{"plan", "--out", mine, "--testlist-dir", filepath.Join(ref, "testlists"),
			"--containers", filepath.Join(ref, "containers.toml")}, common...)...)
		if r.code != 0 {
			t.Fatalf("selection %d: opx exit %d: %s", i, r.code, r.stderr)
		}
		want, _ := os.ReadFile(seedOut)
		got, _ := os.ReadFile(mine)
		if !bytes.Equal(got, want) {
			t.Fatalf("selection %d: manifests differ (%d vs %d bytes)\n%s", i, len(got), len(want), firstDiff(got, want))
		}
		if r.stdout != so.String() {
			t.Fatalf("selection %d: matrix differs\n got %s\nwant %s", i, r.stdout, so.String())
		}
	}
}

// TestPlanErrorsMatchOperatorXCI checks that opx fails where the seed fails, with the seed's message
// (and at most a parenthesized hint after it).
func TestPlanErrorsMatchOperatorXCI(t *testing.T) {
	shared := sharedDir(t)
	ref, platforms := seedFixture(t)
	for _, sel := range [][]string{
		{"--runner", "cluster:h100-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1"},
		{"--runner", "cluster:h200-dgxc", "--backends", "vllm,flashinfer,foo", "--testlists", "gemm_perf", "--world-sizes", "1"},
		{"--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1,x"},
		{"--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "3"},
		{"--runner", "cluster:gb200-nv", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "8"},
		{"--runner", "cluster:mi325x-amds", "--backends", "vllm", "--testlists", "attention_perf", "--world-sizes", "1"},
		{"--runner", "cluster:h100-dsxe", "--backends", "torch", "--testlists", "gemm_perf", "--world-sizes", "1,1"},
		{"--runner", "cluster:h100-dsxe", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "2"},
		{"--runner", "cluster:h100-dsxe", "--backends", "vllm", "--testlists", "gemm_legacy", "--world-sizes", "1", "--chunk-size", "20"},
	} {
		args := append(sel, "--run-id", "1", "--attempt", "1", "--source-sha", "s", "--platform-config", platforms)
		if !contains(args, "--chunk-size") {
			args = append(args, "--chunk-size", "500")
		}
		cmd := exec.Command(filepath.Join(shared, "seed", "seedcli"), append([]string{ref, "--", "plan", "--out", filepath.Join(t.TempDir(), "m.json")}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%v: seed succeeded", sel)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		_, seedMsg, _ := strings.Cut(last, ": ")
		out2 := filepath.Join(t.TempDir(), "m.json")
		r := runOpx(t, append([]string{"plan", "--out", out2, "--testlist-dir", filepath.Join(ref, "testlists"), "--containers", filepath.Join(ref, "containers.toml")}, args...)...)
		// the seed's text, word for word; opx may add a hint after it in parentheses (the
		// valid runners or backends)
		same := r.stderr == "opx: "+seedMsg+"\n" || strings.HasPrefix(r.stderr, "opx: "+seedMsg+" (") && strings.HasSuffix(r.stderr, ")\n")
		if r.code != 1 || !same {
			t.Errorf("%v: opx exit %d %q; seed said %q", sel, r.code, r.stderr, seedMsg)
		}
		if _, err := os.Stat(out2); err == nil {
			t.Errorf("%v: a manifest was written on error", sel)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func firstDiff(a, b []byte) string {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	lo := max(0, i-200)
	return "opx:  ..." + string(a[lo:min(len(a), i+100)]) + "\nseed: ..." + string(b[lo:min(len(b), i+100)])
}
