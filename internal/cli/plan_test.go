package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanBadInput: each bad input gets one line naming the file and place, exit 1, no
// panic, and the manifest a user already had is left as it was.
func TestPlanBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	tl := filepath.Join(dir, "tl")
	write("tl/good.json", `[{"type": "gemm", "args": {"m": 1}}]`)
	write("tl/broken.json", "[{\"type\": \"gemm\",\n \"args\": {\"m\": 1,}}]")
	write("tl/noargs.json", `[{"type": "gemm", "args": {}}, {"type": "gemm"}]`)
	write("tl/notlist.json", `{"type": "gemm"}`)
	goodCfg := write("cfg/good.json", `{"platforms": {"cluster:h200-dgxc": {"gpus_per_node": 8, "image_platform": "linux/amd64"}}}`)
	write("cfg/broken.json", `{"platforms": {"cluster:h200-dgxc": {"gpus_per_node": 8,,}}}`)
	write("cfg/nogpus.json", `{"platforms": {"cluster:h200-dgxc": {"image_platform": "linux/amd64"}}}`)
	write("cfg/custom.json", `{"platforms": {"mi300x": {"gpus_per_node": 8}}}`)
	write("cfg/badbase.json", `{"base": "nothere.json", "platforms": {}}`)
	ctr := write("containers.toml", "[nvidia.vllm]\nimage = \"v:1@sha256:"+strings.Repeat("a", 64)+"\"\n")
	write("broken.toml", "[nvidia.vllm]\nimage = \"v:1\nx=1\n")
	write("wrongtype.toml", "[nvidia.vllm]\nimage = 5\n")
	out := write("out/manifest.json", "precious\n")

	base := func(extra ...string) []string {
		args := []string{"plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "good",
			"--world-sizes", "1", "--testlist-dir", tl, "--containers", ctr, "--platform-config", goodCfg, "--out", out}
		// later flags win
		return append(args, extra...)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"broken testlist JSON", base("--testlists", "broken"), 1, "broken.json: invalid JSON at line 2 column 18: expecting property name"},
		{"shape without args", base("--testlists", "noargs"), 1, `noargs.json: shape [1] has no "args"`},
		{"testlist not a list", base("--testlists", "notlist"), 1, "notlist.json: a testlist is a JSON array of shapes, found object"},
		{"unknown testlist", base("--testlists", "good,nope"), 1, `unknown testlist "nope" in ` + tl + "; available: broken, good, noargs, notlist"},
		{"path traversal in testlist", base("--testlists", "../cfg/good"), 1, "invalid testlist name: '../cfg/good'"},
		{"empty testlist name", base("--testlists", "good,"), 1, "invalid testlist name: ''"},
		{"broken platform config", base("--platform-config", filepath.Join(dir, "cfg/broken.json")), 1, "cfg/broken.json: invalid JSON at line 1 column 57: expecting property name"},
		{"missing gpus_per_node", base("--platform-config", filepath.Join(dir, "cfg/nogpus.json")), 1, `cfg/nogpus.json: platforms."cluster:h200-dgxc" has no "gpus_per_node"`},
		{"profile-keyed overlay", base("--platform-config", filepath.Join(dir, "cfg/custom.json")), 1, `platforms."mi300x" is not a built-in runner label and has no "cluster"`},
		{"missing base", base("--platform-config", filepath.Join(dir, "cfg/badbase.json")), 1, "cfg/badbase.json: base: " + filepath.Join(dir, "cfg/nothere.json") + ": no such file or directory"},
		{"missing platform config", base("--platform-config", filepath.Join(dir, "nope.json")), 1, "nope.json: no such file or directory"},
		{"broken TOML", base("--containers", filepath.Join(dir, "broken.toml")), 1, "broken.toml: line 2 column"},
		{"wrong TOML type", base("--containers", filepath.Join(dir, "wrongtype.toml")), 1, "wrongtype.toml:"},
		{"unknown runner", base("--runner", "cluster:h900-x"), 1, "unsupported runner: cluster:h900-x"},
		{"unknown backend", base("--backends", "vllm,nope"), 1, "no nvidia backend module for: nope"},
		{"bad world size", base("--world-sizes", "1,two"), 1, "invalid literal for int() with base 10: 'two'"},
		{"bad chunk size type", base("--chunk-size", "many"), 2, "invalid argument \"many\" for \"--chunk-size\""},
		{"bad mode", base("--mode", "fast"), 1, "mode must be one of timing, counters"},
		{"missing flag", []string{"plan", "--backends", "vllm"}, 2, "required flag(s)"},
		{"unknown flag", base("--bogus"), 2, "unknown flag: --bogus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runOpx(t, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, c.code, r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Fatalf("stderr %q lacks %q", r.stderr, c.want)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if (c.code == 1 && len(lines) != 1) || strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
				t.Fatalf("not one clean line: %q", r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout on error: %q", r.stdout)
			}
			if b, _ := os.ReadFile(out); string(b) != "precious\n" {
				t.Fatalf("the existing manifest was touched: %q", b)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "out", "*.tmp")); len(m) > 0 {
				t.Fatalf("temporary files left: %v", m)
			}
		})
	}
}

func TestPlanLocalCPUAndHelp(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.json")
	r := runOpx(t, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--out", out)
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	if !strings.HasPrefix(r.stdout, `{"include":[{"id":"local-`) || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("matrix %q", r.stdout)
	}
	b, _ := os.ReadFile(out)
	for _, want := range []string{`"image": ""`, `"digest": ""`, `"import_uri": ""`, `"cluster": "local"`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("manifest lacks %s", want)
		}
	}
	h := runOpx(t, "plan", "--help")
	if h.code != 0 || !strings.Contains(h.stdout, "--platform-config") || !strings.Contains(h.stdout, "Shard ids, manifests") {
		t.Fatalf("help: %d %q", h.code, h.stdout)
	}
	v := runOpx(t, "version")
	if v.code != 0 || !strings.HasPrefix(v.stdout, "opx ") {
		t.Fatalf("version: %q", v.stdout)
	}
}
