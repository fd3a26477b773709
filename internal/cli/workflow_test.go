package cli

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/testenv"
)

const workflowPath = "../../.github/workflows/operatorx-sweep.yml"

// actionlint (pinned in tools/go.mod, not in the product's) over the workflows (the sweep
// and the pull request's A/B); with shellcheck on PATH (scripts/test.sh installs it) it
// lints every run: script too.
func TestWorkflowActionlint(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil && os.Getenv("OPX_REQUIRE_SHELLCHECK") != "" {
		t.Fatal("shellcheck not found; scripts/test.sh installs it")
	}
	for _, wf := range []string{"operatorx-sweep.yml", "operatorx-pr-ab.yml"} {
		cmd := exec.Command("go", "tool", "actionlint", "-color=false", "../.github/workflows/"+wf)
		cmd.Dir = "../../tools"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("actionlint %s: %v\n%s", wf, err, out)
		}
	}
}

// Each run: script that calls opx is run in bash (as GitHub does: -eo pipefail) with
// $OPX a recording fake, and every command line it recorded goes through opx's own
// argument parser: the subcommand exists, its flags parse, required flags are there and
// positional arguments are accepted.
func TestWorkflowOpxInvocationsParse(t *testing.T) {
	blocks := testenv.RunBlocks(t, workflowPath)
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
	if got := strings.Join(subcommands, ","); got != "execute,finalize,history,history,history,history,plan,recover,report,summarize" {
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

// The history job keeps one history, whatever else runs: its fetch step, run in bash with
// a recording stand-in gh (the documented "List artifacts for a repository" response,
// testdata/gh), takes the newest store any earlier run uploaded — the failed nightly's,
// after a pull-request run and a cancelled one that uploaded none — fails loudly when that
// store cannot be downloaded, when the artifacts cannot be listed or when every store has
// expired, warns when the store is old, and starts a store only when none ever existed.
func TestWorkflowKeepsOneHistory(t *testing.T) {
	script := testenv.RunBlocks(t, workflowPath)["Fetch the store the previous run left"]
	if script == "" {
		t.Fatal("no fetch step in the history job")
	}
	var doc map[string]any
	b, err := os.ReadFile("../../testdata/gh/list-artifacts.json")
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("testdata/gh/list-artifacts.json: %v", err)
	}
	example := doc["artifacts"].([]any)[0].(map[string]any)
	artifact := func(run int, daysAgo int, expired bool) any {
		a := maps.Clone(example)
		wr := maps.Clone(a["workflow_run"].(map[string]any))
		wr["id"] = run
		a["workflow_run"], a["name"], a["expired"], a["id"] = wr, "opx-history", expired, run*10
		a["created_at"] = time.Now().UTC().AddDate(0, 0, -daysAgo).Format(time.RFC3339)
		return a
	}
	const this = 500 // 499: a pull-request run, 498: a cancelled one (no store); 497: a failed nightly; 496: an older success
	for _, c := range []struct {
		name      string
		artifacts []any
		listFails bool
		badRun    int // its download fails
		code      int
		from      string // the run whose store is used ("" none)
		says      string
	}{
		{"after a PR run and a cancelled one", []any{artifact(497, 1, false), artifact(496, 2, false)}, false, 0, 0, "497", "history store from run 497"},
		{"the newest store cannot be downloaded", []any{artifact(496, 2, false), artifact(497, 1, false)}, false, 497, 1, "", "could not be downloaded: failing rather than start an empty store"},
		{"the artifacts cannot be listed", nil, true, 0, 1, "", "cannot list this repository's opx-history artifacts"},
		{"every store has expired", []any{artifact(300, 120, true)}, false, 0, 1, "", "every earlier history store has expired"},
		{"an old store", []any{artifact(400, 75, false), artifact(350, 100, true)}, false, 0, 0, "400", "the history store is 75 days old"},
		{"the first run", []any{}, false, 0, 0, "", "no history store from an earlier run: starting one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			resp := filepath.Join(dir, "artifacts.json")
			body, _ := json.Marshal(map[string]any{"total_count": len(c.artifacts), "artifacts": c.artifacts})
			os.WriteFile(resp, body, 0o644)
			stores := filepath.Join(dir, "stores")
			for _, run := range []int{496, 497, 400} {
				os.MkdirAll(filepath.Join(stores, strconv.Itoa(run)), 0o755)
				os.WriteFile(filepath.Join(stores, strconv.Itoa(run), "opx-history.db"), []byte("store of "+strconv.Itoa(run)), 0o644)
			}
			rec := filepath.Join(dir, "gh-calls")
			listFails := map[bool]string{true: "1", false: "0"}[c.listFails]
			gh := `#!/bin/bash
# a stand-in for gh: records each call; answers the artifacts listing with the documented
# response shape and run download by copying the run's artifact into -D
printf '%s\n' "$*" >> "` + rec + `"
case "$1 $2" in
"api repos/"*) [ "` + listFails + `" = 1 ] && { echo "HTTP 502" >&2; exit 1; }; cat "` + resp + `" ;;
"run download")
  run=$5 dest=$9
  [ "$run" = "` + strconv.Itoa(c.badRun) + `" ] && { echo "error downloading opx-history" >&2; exit 1; }
  cp "` + stores + `/$run/opx-history.db" "$dest/" ;;
*) echo "unexpected gh call: $*" >&2; exit 3 ;;
esac
`
			bin := filepath.Join(dir, "bin")
			os.MkdirAll(bin, 0o755)
			os.WriteFile(filepath.Join(bin, "gh"), []byte(gh), 0o755)
			work := filepath.Join(dir, "work")
			os.MkdirAll(work, 0o755)
			env := filepath.Join(dir, "github-env")
			cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "GITHUB_REPOSITORY=org/repo",
				"GITHUB_RUN_ID="+strconv.Itoa(this), "GITHUB_ENV="+env, "OPX_HISTORY_START=")
			out, err := cmd.CombinedOutput()
			code := testenv.ExitCode(t, err)
			got, _ := os.ReadFile(filepath.Join(work, "opx-history.db"))
			setEnv, _ := os.ReadFile(env)
			if code != c.code || !strings.Contains(string(out), c.says) {
				t.Errorf("exit %d, want %d, saying %q:\n%s", code, c.code, c.says, out)
			}
			switch {
			case c.from != "" && string(got) != "store of "+c.from:
				t.Errorf("the store used is %q, want run %s's", got, c.from)
			case c.from == "" && len(got) > 0:
				t.Errorf("a store was left although none should be used: %q", got)
			case c.code != 0 && strings.Contains(string(setEnv), "OPX_HISTORY="):
				t.Errorf("a failed fetch still pointed the job at a store: %s", setEnv)
			case c.code == 0 && !strings.Contains(string(setEnv), "OPX_HISTORY="+work+"/opx-history.db"):
				t.Errorf("GITHUB_ENV: %q", setEnv)
			}
			calls, _ := os.ReadFile(rec)
			if !strings.Contains(string(calls), "api repos/org/repo/actions/artifacts?name=opx-history") || strings.Contains(string(calls), "run list") {
				t.Errorf("gh calls: %s (want the artifacts by name, never the newest run)", calls)
			}
		})
	}
}
