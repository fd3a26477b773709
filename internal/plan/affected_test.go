package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/testenv"
)

// repo is a git repository holding testlists/ and containers.toml at a commit "base",
// and a branch per change: each edits the files given (path -> new content, "" removes).
func repo(t *testing.T, changes map[string]map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git := testenv.Git(t, dir)
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if s == "" {
			os.Remove(filepath.Join(dir, p))
			return
		}
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	git("init", "-q", "-b", "base")
	write("testlists/gemm_perf.json", `[{"type": "gemm", "args": {"m": 1}}]`)
	write("testlists/smoke_parallel.json", `[{"type": "gemm", "args": {"m": 2}}]`)
	write("containers.toml", "[nvidia.vllm]\nimage = \"vllm:1\"\n\n[amd.vllm]\nimage = \"vllm-rocm:1\"\n")
	write("README.md", "hello\n")
	git("add", "-A")
	git("commit", "-qm", "base")
	for name, files := range changes {
		git("checkout", "-q", "-b", name, "base")
		for p, s := range files {
			write(p, s)
		}
		git("add", "-A")
		git("commit", "-qm", name)
	}
	git("checkout", "-q", "base")
	return dir
}

// What a change touches: a testlist file its testlist; an image entry its backend on its
// vendor alone; any other file, a removed image or both a testlist and an image every
// case; a change to none of the selection nothing — each with why.
func TestAffectedBy(t *testing.T) {
	dir := repo(t, map[string]map[string]string{
		"testlist": {"testlists/gemm_perf.json": `[{"type": "gemm", "args": {"m": 3}}]`},
		"image":    {"containers.toml": "[nvidia.vllm]\nimage = \"vllm:2\"\n\n[amd.vllm]\nimage = \"vllm-rocm:1\"\n"},
		"both":     {"testlists/gemm_perf.json": `[]`, "containers.toml": "[nvidia.vllm]\nimage = \"vllm:2\"\n\n[amd.vllm]\nimage = \"vllm-rocm:1\"\n"},
		"other":    {"README.md": "bye\n", "testlists/gemm_perf.json": `[]`},
		"removed":  {"containers.toml": "[nvidia.vllm]\nimage = \"vllm:1\"\n"},
		"unused":   {"testlists/attention_perf.json": `[]`},
	})
	lists, backends := []string{"gemm_perf", "smoke_parallel"}, []string{"vllm"}
	for _, c := range []struct {
		branch, vendor string
		lists          []string
		backends       []string
		why            string
	}{
		{"testlist", "nvidia", []string{"gemm_perf"}, backends, "testlist gemm_perf: testlists/gemm_perf.json changed"},
		{"image", "nvidia", lists, backends, "backend vllm: containers.toml [nvidia.vllm] changed"},
		{"image", "amd", nil, nil, ""},
		{"both", "nvidia", lists, backends, "every case: both a testlist and a backend's image or harness changed"},
		{"other", "nvidia", lists, backends, "every case: README.md changed (no narrower mapping: every case)"},
		{"removed", "nvidia", lists, backends, "every case: containers.toml [amd.vllm] removed (every case)"},
		{"unused", "nvidia", nil, nil, ""},
	} {
		a, err := AffectedBy(t.Context(), dir, "base.."+c.branch, filepath.Join(dir, "testlists"), filepath.Join(dir, "containers.toml"), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.branch, err)
		}
		l, b, why := a.Narrow(lists, backends, c.vendor)
		if !slices.Equal(l, c.lists) || !slices.Equal(b, c.backends) || (c.why != "") != slices.Contains(why, c.why) || c.why == "" && len(why) != 0 {
			t.Errorf("%s on %s: testlists %v, backends %v, why %q; want %v, %v, %q", c.branch, c.vendor, l, b, why, c.lists, c.backends, c.why)
		}
	}
	// the embedded catalog's names: testlists/NAME.json anywhere
	if a, err := AffectedBy(t.Context(), dir, "base...testlist", "", "", nil); err != nil || a.Testlists["gemm_perf"] == "" {
		t.Errorf("without --testlist-dir: %+v %v", a, err)
	}
	var bad *RangeError
	for _, r := range []string{"base", "base..", "--output=x..y", "base..;rm"} {
		if _, err := AffectedBy(t.Context(), dir, r, "", "", nil); !errors.As(err, &bad) {
			t.Errorf("%q: %v", r, err)
		}
	}
	if _, err := AffectedBy(t.Context(), dir, "base..nosuch", "", "", nil); err == nil || !strings.Contains(err.Error(), "git diff") {
		t.Errorf("an unknown revision: %v", err)
	}
	if _, err := AffectedBy(t.Context(), t.TempDir(), "base..pr", "", "", nil); err == nil || !strings.Contains(err.Error(), "not a git repository") || strings.Contains(err.Error(), "shallow") {
		t.Errorf("not a repository: %v", err)
	}
}

// The backends kept are in the order given (the planner's choices follow it).
func TestNarrowKeepsTheBackendsOrder(t *testing.T) {
	a := &Affected{Testlists: map[string]string{}, Images: map[string]string{"nvidia.vllm": "x", "nvidia.sglang": "y", "amd.vllm": "z"}}
	if _, b, _ := a.Narrow([]string{"gemm_perf"}, []string{"vllm", "sglang"}, "nvidia"); !slices.Equal(b, []string{"vllm", "sglang"}) {
		t.Errorf("backends %v, want vllm, sglang", b)
	}
}

// A harness path the platform config maps: its backends' cases, in its smoke testlists
// when every changed path names some (of those given; all given when none of them is),
// every testlist when one names none; with a testlist changed too, every case; a file no
// path holds, every case.
func TestAffectedByHarnessPaths(t *testing.T) {
	dir := repo(t, map[string]map[string]string{
		"vllm":     {"harness/backends/vllm/gemm.py": "x = 2\n"},
		"vllm-all": {"harness/backends/vllm/gemm.py": "x = 2\n", "harness/common.py": "y = 2\n"},
		"torch":    {"harness/backends/torch/op.py": "z = 1\n"},
		"plus":     {"harness/backends/vllm/gemm.py": "x = 2\n", "testlists/gemm_perf.json": `[]`},
		"stray":    {"harness/backends/vllm/gemm.py": "x = 2\n", "harness/setup.py": "s\n"},
	})
	paths := []platform.HarnessPath{
		{Path: "harness/backends/vllm/", Backends: []string{"vllm"}, Testlists: []string{"smoke_parallel"}},
		{Path: "harness/common.py", Backends: []string{"vllm", "torch"}},
		{Path: "harness/backends/torch/", Backends: []string{"torch"}, Testlists: []string{"torch_smoke"}},
	}
	lists, backends := []string{"gemm_perf", "smoke_parallel"}, []string{"torch", "vllm"}
	for _, c := range []struct {
		branch   string
		lists    []string
		backends []string
		why      string
	}{
		{"vllm", []string{"smoke_parallel"}, []string{"vllm"}, "backend vllm: harness/backends/vllm/gemm.py changed (harness path harness/backends/vllm/)"},
		{"vllm-all", lists, backends, "backend torch: harness/common.py changed (harness path harness/common.py)"},
		{"torch", lists, []string{"torch"}, "the harness paths' testlists (torch_smoke) are not in the selection: every testlist given"},
		{"plus", lists, backends, "every case: both a testlist and a backend's image or harness changed"},
		{"stray", lists, backends, "every case: harness/setup.py changed (no narrower mapping: every case)"},
	} {
		a, err := AffectedBy(t.Context(), dir, "base.."+c.branch, filepath.Join(dir, "testlists"), filepath.Join(dir, "containers.toml"), paths)
		if err != nil {
			t.Fatalf("%s: %v", c.branch, err)
		}
		l, b, why := a.Narrow(lists, backends, "nvidia")
		if !slices.Equal(l, c.lists) || !slices.Equal(b, c.backends) || !slices.Contains(why, c.why) {
			t.Errorf("%s: testlists %v, backends %v, why %q; want %v, %v, %q", c.branch, l, b, why, c.lists, c.backends, c.why)
		}
	}
	// without the mapping, a harness file moves every case (the safe default)
	a, _ := AffectedBy(t.Context(), dir, "base..vllm", "", "", nil)
	if l, b, _ := a.Narrow(lists, backends, "nvidia"); !slices.Equal(l, lists) || !slices.Equal(b, backends) {
		t.Errorf("no mapping: %v %v", l, b)
	}
}
