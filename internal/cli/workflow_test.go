package cli

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/platform"
)

const workflowPath = "../../.github/workflows/operatorx-sweep.yml"

// actionlint (pinned in tools/go.mod, not in the product's) over the workflow; with
// shellcheck on PATH (scripts/test.sh installs it) it lints every run: script too.
func TestWorkflowActionlint(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil && os.Getenv("OPX_REQUIRE_SHELLCHECK") != "" {
		t.Fatal("shellcheck not found; scripts/test.sh installs it")
	}
	cmd := exec.Command("go", "tool", "actionlint", "-color=false", "../.github/workflows/operatorx-sweep.yml")
	cmd.Dir = "../../tools"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
}

// runBlocks returns the workflow's `run: |` scripts by step name.
func runBlocks(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	blocks := map[string]string{}
	name := ""
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if n, ok := strings.CutPrefix(strings.TrimPrefix(l, "- "), "name: "); ok {
			name = n
		}
		if l != "run: |" {
			if strings.Contains(l, "run:") && !strings.HasPrefix(l, "#") {
				t.Fatalf("%s:%d: write run steps as `run: |` blocks (this test reads only those)", path, i+1)
			}
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		var body []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			body = append(body, strings.TrimPrefix(next, strings.Repeat(" ", indent+2)))
			i++
		}
		if _, dup := blocks[name]; dup {
			name += " (again)"
		}
		blocks[name] = strings.Join(body, "\n")
	}
	return blocks
}

// Each run: script that calls opx is run in bash (as GitHub does: -eo pipefail) with
// $OPX a recording fake, and every command line it recorded goes through opx's own
// argument parser: the subcommand exists, its flags parse, required flags are there and
// positional arguments are accepted.
func TestWorkflowOpxInvocationsParse(t *testing.T) {
	blocks := runBlocks(t, workflowPath)
	dir := t.TempDir()
	rec := filepath.Join(dir, "argv")
	fake := filepath.Join(dir, "opx-fake")
	os.WriteFile(fake, []byte("#!/bin/bash\n# recording fake of opx: one NUL-separated argv per call\nprintf '%s\\0' \"$@\" >> \""+rec+"\"\nprintf '\\n' >> \""+rec+"\"\n"), 0o755)
	var subcommands []string
	for name, script := range blocks {
		if !strings.Contains(script, `"$OPX"`) || strings.Contains(script, `OPX=`) {
			continue
		}
		for _, l := range strings.Split(script, "\n") {
			if strings.Contains(l, `"$OPX" `) && !strings.HasPrefix(strings.TrimSpace(l), `exec "$OPX" `) {
				t.Errorf("step %q: opx must be exec'd so GitHub's cancel signal reaches it: %s", name, l)
			}
		}
		os.Remove(rec)
		work := t.TempDir()
		os.MkdirAll(filepath.Join(work, "harness", "operatorx"), 0o755)
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OPX=" + fake, "GITHUB_RUN_ID=123", "GITHUB_RUN_ATTEMPT=1", "GITHUB_SHA=cafe",
			"GITHUB_STEP_SUMMARY=" + filepath.Join(work, "summary.md"), "GITHUB_OUTPUT=" + filepath.Join(work, "out"), "GITHUB_ENV=" + filepath.Join(work, "env"),
			"RUNNER_NAME=runner-1", "RUNNER_TEMP=" + work, "OPERATORX_RUNNER=cluster:h100-dsxe", "OPERATORX_BACKENDS=vllm", "OPERATORX_TESTLISTS=gemm_perf",
			"OPERATORX_WORLD_SIZES=1", "OPERATORX_MODE=timing", "OPERATORX_CHUNK_SIZE=500", "OPERATORX_RECOVERY_RUN=99", "OPERATORX_SHARD=h100-0123456789abcdef",
			"OPERATORX_OUTPUT=" + filepath.Join(work, "output"), "OPERATORX_CLEANUP_SECONDS=180"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("step %q: %v\n%s", name, err, out)
			continue
		}
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Errorf("step %q called no opx", name)
			continue
		}
		for _, call := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			argv := strings.Split(strings.TrimSuffix(call, "\x00"), "\x00")
			subcommands = append(subcommands, argv[0])
			if err := parseOnly(argv); err != nil {
				t.Errorf("step %q: opx %s: %v", name, strings.Join(argv, " "), err)
			}
			if argv[0] == "execute" && !strings.Contains(call, "--harness-dir\x00harness/operatorx") {
				t.Errorf("step %q: the harness checkout is not passed to execute: %q", name, argv)
			}
		}
	}
	sort.Strings(subcommands)
	if got := strings.Join(subcommands, ","); got != "execute,finalize,history,history,history,plan,recover,report,summarize" {
		t.Errorf("opx subcommands the workflow runs: %s", got)
	}
	// the parser check can fail
	if parseOnly([]string{"execute", "--shard", "x", "--no-such-flag"}) == nil || parseOnly([]string{"execute", "--shard", "x"}) == nil ||
		parseOnly([]string{"nosuch"}) == nil || parseOnly([]string{"compare", "a"}) == nil {
		t.Error("parseOnly accepts bad command lines")
	}
}

// parseOnly runs argv through opx's command tree without running the command.
func parseOnly(argv []string) error {
	root := newRoot(context.Background(), Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: os.Getenv})
	c, rest, err := root.Find(argv)
	if err != nil {
		return err
	}
	if c == root {
		return &UsageError{os.ErrNotExist}
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if err := c.ValidateArgs(c.Flags().Args()); err != nil {
		return err
	}
	return c.ValidateRequiredFlags()
}

// The release target builds static binaries for both architectures, stamped.
func TestReleaseBinariesAreStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	dist := t.TempDir()
	cmd := exec.Command("bash", "scripts/release.sh", "v0.0.0-test")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "OPX_DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		p := filepath.Join(dist, "opx-linux-"+arch)
		f, err := elf.Open(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if f.Machine != machine {
			t.Errorf("%s: machine %v, want %v", p, f.Machine, machine)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: has %v: not statically linked", p, prog.Type)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s: needs %v", p, libs)
		}
		f.Close()
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil || !strings.Contains(string(sums), "opx-linux-arm64") {
		t.Errorf("SHA256SUMS: %v %s", err, sums)
	}
	if runtime.GOARCH == "amd64" {
		out, err := exec.Command(filepath.Join(dist, "opx-linux-amd64"), "version").Output()
		head, _ := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
		want := "opx v0.0.0-test (" + strings.TrimSpace(string(head)) + ")"
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("version: %q %v, want %q", out, err, want)
		}
	}
}

// The workflow's runner choices are exactly the built-in cluster runners the planner
// knows, in its order: a dispatch can never pick a label plan refuses.
func TestWorkflowRunnerChoicesAreTheRegistry(t *testing.T) {
	b, err := os.ReadFile(workflowPath)
	if err != nil {
		t.Fatal(err)
	}
	var choices []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch t := strings.TrimSpace(l); {
		case t == "runner:":
			in = true
		case in && strings.HasPrefix(t, "- "):
			choices = append(choices, strings.TrimPrefix(t, "- "))
		case in && len(choices) > 0:
			in = false
		}
	}
	reg, _, err := platform.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, l := range reg.Labels() {
		if l != platform.Local {
			labels = append(labels, l)
		}
	}
	if strings.Join(choices, " ") != strings.Join(labels, " ") {
		t.Errorf("the workflow's runner choices\n  %v\nare not the planner's cluster runners\n  %v", choices, labels)
	}
}
