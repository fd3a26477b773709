package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// opx list names what a plan can use (issue 20): every runner label with its platform,
// GPUs per node, architecture and container mode; each vendor's backends; the testlists;
// the images. Errors about unknown runners and backends list the valid ones.
func TestList(t *testing.T) {
	for what, wants := range map[string][]string{
		"runners": {"RUNNER", "cluster:h100-dsxe    h100_dgxc_8x    h100    nvidia  8          linux/amd64  pyxis",
			"cluster:gb200-nv     gb200_nvl72_4x  gb200   nvidia  4          linux/arm64  pyxis", "local (processes on this machine)"},
		"backends":  {"nvidia  cpu (built in), vllm", "amd     cpu (built in), torch, vllm"},
		"testlists": {"cpu_smoke              6      gemm", "moe_subset_legacy      317    moe_forward"},
		"images":    {"nvidia  vllm     vllm/vllm-openai:nightly-", "(resolved by plan)"},
	} {
		r := runOpx(t, "list", what)
		if r.code != 0 {
			t.Fatalf("list %s: exit %d %s", what, r.code, r.stderr)
		}
		for _, w := range wants {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("list %s lacks %q:\n%s", what, w, r.stdout)
			}
		}
	}
	dir := t.TempDir()
	cfg := stagePlatform(t, dir, dir)
	if r := runOpx(t, "list", "runners", "--platform-config", cfg); !strings.Contains(r.stdout, "cluster:bad-stage") || !strings.Contains(r.stdout, "none") {
		t.Errorf("a custom runner is not listed: %s %s", r.stdout, r.stderr)
	}
	if r := runOpx(t, "list", "nothing"); r.code != 2 || !strings.Contains(r.stderr, "runners, backends, testlists or images") {
		t.Errorf("list nothing: exit %d %q", r.code, r.stderr)
	}
	r := runOpx(t, "plan", "--runner", "cluster:nosuch", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1", "--out", filepath.Join(dir, "m.json"))
	if r.code != 1 || !strings.Contains(r.stderr, "unsupported runner: cluster:nosuch (runners: cluster:h100-dsxe, ") || !strings.Contains(r.stderr, "local; see opx list runners)") {
		t.Errorf("unknown runner: %q", r.stderr)
	}
	r = runOpx(t, "plan", "--runner", "cluster:h200-dgxc", "--backends", "sglang", "--testlists", "gemm_perf", "--world-sizes", "1", "--out", filepath.Join(dir, "m.json"))
	if r.code != 1 || !strings.Contains(r.stderr, "no nvidia backend module for: sglang (nvidia backends: cpu, vllm; see opx list backends)") {
		t.Errorf("unknown backend: %q", r.stderr)
	}
}

// Help for users (issue 20): sweep commands first, the per-shard and node-side commands in
// groups of their own, every command described, no spec references, a --version flag, and
// opx run's plan flags without "(required)" next to their defaults.
func TestHelpForUsers(t *testing.T) {
	r := runOpx(t, "--help")
	sweeps, shard, node := strings.Index(r.stdout, "Sweeps:\n  run "), strings.Index(r.stdout, "One shard on a cluster"), strings.Index(r.stdout, "Run by opx itself on the compute node:")
	if r.code != 0 || sweeps < 0 || shard < sweeps || node < shard {
		t.Errorf("help groups out of order:\n%s", r.stdout)
	}
	root := newRoot(t.Context(), Env{})
	var all []*cobra.Command // every command, subcommands too
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			all = append(all, sub)
			walk(sub)
		}
	}
	walk(root)
	for _, c := range all {
		for _, text := range []string{c.Short, c.Long, c.Example} {
			if strings.Contains(text, "compat-spec") || strings.Contains(text, "§") {
				t.Errorf("%s help cites the spec: %q", c.Name(), text)
			}
			// "the seed" is the developers' word for ci.py; a user knows it as ci.py
			if strings.Contains(strings.ToLower(text), "seed") {
				t.Errorf("%s help speaks of the seed: %q", c.Name(), text)
			}
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(strings.ToLower(f.Usage), "seed") {
				t.Errorf("%s --%s speaks of the seed: %q", c.Name(), f.Name, f.Usage)
			}
		})
		if c.Short == "" || (c.Long == "" && c.Name() != "help" && c.Name() != "completion" && c.Name() != "version") {
			t.Errorf("%s is not described", c.Name())
		}
	}
	if r := runOpx(t, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "opx ") {
		t.Errorf("--version: exit %d %q", r.code, r.stdout)
	}
	if r := runOpx(t, "run", "--help"); strings.Contains(r.stdout, "(required)") {
		t.Errorf("run --help marks defaulted flags required:\n%s", r.stdout)
	}
	if got := (&SignalError{Signal: 2}).Error(); got != "interrupted by SIGINT (Ctrl-C)" {
		t.Errorf("SignalError: %q", got)
	}
}

// doctor agrees with execute (issue 20): an AMD runner without an integer
// operator.cpus_per_node, which execute's salloc needs, is not "ready"; a storage root
// that is configured but absent is named.
func TestDoctorAgreesWithExecute(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "p.json"), `{"base": "opx:embedded", "platforms": {"cluster:lab-mi300": {"cluster": "lab_8x", "family": "mi300x",
	  "gpus_per_node": 8, "image_platform": "linux/amd64", "operator": {"container": "none", "partition": "debug", "stage_dir": "`+filepath.Join(dir, "absent")+`"}}}}`)
	r := runOpx(t, "doctor", "--runner", "cluster:lab-mi300", "--platform-config", cfg)
	for _, want := range []string{"operator.cpus_per_node (an integer", "not ready"} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("doctor lacks %q (exit %d):\n%s", want, r.code, r.stdout)
		}
	}
	r = runOpx(t, "doctor", "--runner", "cluster:h200-dgxc", "--platform-config", writeFile(t, filepath.Join(dir, "h.json"),
		`{"base": "opx:embedded", "platforms": {"cluster:h200-dgxc": {"operator": {"stage_dir": "`+filepath.Join(dir, "absent")+`"}}}}`))
	if !strings.Contains(r.stdout, "no writable shared storage root configured for this runner ("+filepath.Join(dir, "absent")+" does not exist)") {
		t.Errorf("doctor does not name the absent root:\n%s", r.stdout)
	}
}

// An offline plan says it fell back to containers.toml's digest (issue 20): the seed did
// it silently.
func TestPlanSaysItUsedTheTableDigest(t *testing.T) {
	dir := t.TempDir()
	d := "sha256:" + strings.Repeat("ab", 32)
	ct := writeFile(t, filepath.Join(dir, "c.toml"), "[nvidia.vllm]\nimage = \"127.0.0.1:1/opx/gone:1\"\ndigest = \""+d+"\"\n")
	r := runOpx(t, "plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1",
		"--containers", ct, "--digest-timeout", "2s", "--out", filepath.Join(dir, "m.json"))
	if r.code != 0 || !strings.Contains(r.stderr, "opx plan: 127.0.0.1:1/opx/gone:1 did not resolve (offline, or the tag is gone); using its digest from containers.toml") {
		t.Errorf("exit %d %q", r.code, r.stderr)
	}
}

// Usage errors are known by when they happen (before any command runs), not by their
// message text: each exits 2 with a pointer to the help.
func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"nosuch"}, {"list"}, {"report", "a", "b"}, {"summarize", "--manifest", "m"}, {"plan", "--bogus"}, {"run", "--max-parallel", "0"}} {
		r := runOpx(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--help')") {
			t.Errorf("%v: exit %d %q", args, r.code, r.stderr)
		}
	}
	// an error once the command runs is not a usage error
	if r := runOpx(t, "report", filepath.Join(t.TempDir(), "nosuch")); r.code != 1 {
		t.Errorf("report of a missing directory: exit %d %q", r.code, r.stderr)
	}
}

// opx list --json gives scripts the same records as the tables.
func TestListJSON(t *testing.T) {
	var runners []struct {
		Runner      string `json:"runner"`
		Vendor      string `json:"vendor"`
		GPUsPerNode int    `json:"gpus_per_node"`
		Container   string `json:"container"`
	}
	r := runOpx(t, "list", "runners", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &runners); err != nil || r.code != 0 {
		t.Fatalf("runners: %v %d %s", err, r.code, r.stderr)
	}
	if len(runners) != 10 || runners[0].Runner != "cluster:h100-dsxe" || runners[0].GPUsPerNode != 8 || runners[9].Runner != "local" || runners[9].Container != "none" || runners[9].Vendor != "cpu" {
		t.Errorf("runners %+v", runners)
	}
	var tls []struct {
		Testlist string   `json:"testlist"`
		Cases    int      `json:"cases"`
		OpTypes  []string `json:"op_types"`
	}
	r = runOpx(t, "list", "testlists", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &tls); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tls {
		found = found || (tl.Testlist == "cpu_smoke" && tl.Cases == 6 && len(tl.OpTypes) == 1 && tl.OpTypes[0] == "gemm")
	}
	if !found {
		t.Errorf("testlists %+v", tls)
	}
	for _, what := range []string{"backends", "images"} {
		var rows []map[string]any
		if r := runOpx(t, "list", what, "--json"); json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) == 0 {
			t.Errorf("%s: %q", what, r.stdout)
		}
	}
}
