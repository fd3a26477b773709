// Package workflow_test runs the PR workflow's shell steps (.github/workflows/
// operatorx-pr-ab.yml) as GitHub would, in order, on this machine: a real git repository
// for the pull request, the real opx built static, opx's local runner for the cluster, a
// stand-in gh that asks a recording GitHub (internal/testenv: the REST API as documented)
// through curl and applies --jq with jq, and the artifact hand-over between jobs done by
// copying the one file.
package workflow_test

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/testenv"
)

var opxBin string

func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

const prWorkflow = "../../.github/workflows/operatorx-pr-ab.yml"

// the stand-in gh: `gh api PATH --jq EXPR`, as GitHub's REST API answers (the recording
// GitHub) and as gh applies --jq (jq -r)
const standInGH = `#!/bin/bash
set -eo pipefail
[ "$1" = api ] || { echo "stand-in gh: only 'gh api' is stood in for" >&2; exit 2; }
path=$2; shift 2; expr=.
while [ $# -gt 0 ]; do case "$1" in --jq) expr=$2; shift 2 ;; *) echo "stand-in gh: unknown $1" >&2; exit 2 ;; esac; done
curl -sSf -H "Authorization: Bearer $GH_TOKEN" -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" \
  -A opx-stand-in-gh "$GITHUB_API_URL/$path" | jq -r "$expr"
`

type flow struct {
	t          *testing.T
	work       string
	steps      map[string]string
	env        map[string]string
	gh         *testenv.GitHub
	head, base string
	harness    string // the head of pull request 8: a change to the harness alone
}

// step runs the named step's script in bash as GitHub does (-eo pipefail) with the flow's
// environment and extra, and returns its exit status and output; GITHUB_OUTPUT and
// GITHUB_ENV lines it wrote are added to the flow's environment (as later steps and jobs
// see them).
func (f *flow) step(name string, extra map[string]string) (int, string) {
	f.t.Helper()
	script, ok := f.steps[name]
	if !ok {
		f.t.Fatalf("the workflow has no step %q", name)
	}
	for _, k := range []string{"out", "env"} {
		os.Remove(filepath.Join(f.work, "github-"+k))
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script)
	cmd.Dir = f.work
	env := map[string]string{}
	for k, v := range f.env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		code = testenv.ExitCode(f.t, err)
	}
	for _, k := range []string{"out", "env"} {
		b, _ := os.ReadFile(filepath.Join(f.work, "github-"+k))
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				f.env[strings.ToUpper(k)] = v
			}
		}
	}
	return code, string(out)
}

// newFlow is a pull request (number 7) on a repository whose harness tree is operatorx/
// and whose testlists/ab_smoke.json the head changes (a case added: nothing else), the workflow's steps,
// and a recording GitHub that knows the pull request.
func newFlow(t *testing.T) *flow {
	work := t.TempDir()
	f := &flow{t: t, work: work, steps: testenv.RunBlocks(t, prWorkflow)}
	repo := filepath.Join(work, "pr")
	git := testenv.Git(t, repo)
	write := func(p, body string) {
		os.MkdirAll(filepath.Dir(filepath.Join(repo, p)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(repo, 0o755)
	git("init", "-q", "-b", "main")
	shape := func(m int, dt string) string {
		return `{"type": "gemm", "args": {"m": ` + strconv.Itoa(m) + `, "n": 128, "k": 128, "a": {"dtype": "` + dt + `"}, "b": {"dtype": "` + dt + `"}, "out": "` + dt + `"}, "sources": []}`
	}
	write("testlists/ab_smoke.json", "["+shape(128, "fp32")+", "+shape(64, "bf16")+"]\n")
	write("testlists/other.json", "["+shape(256, "fp64")+"]\n")
	write("operatorx/__init__.py", "VERSION = 1\n")
	// the repository's platform config: its harness maps to the cpu backend's smoke list
	write("opx-platforms.json", `{"base": "opx:embedded", "platforms": {}, "affected": {"harness": [{"path": "operatorx/", "backends": ["cpu"], "testlists": ["ab_smoke"]}]}}`)
	git("add", ".")
	git("commit", "-q", "-m", "base")
	f.base = git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "feature")
	write("testlists/ab_smoke.json", "["+shape(128, "fp32")+", "+shape(64, "bf16")+", "+shape(96, "fp64")+"]\n")
	git("commit", "-qam", "head")
	f.head = git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "harness", "main")
	write("operatorx/__init__.py", "VERSION = 2\n")
	git("commit", "-qam", "harness")
	f.harness = git("rev-parse", "HEAD")
	git("checkout", "-q", "main")

	f.gh = &testenv.GitHub{Token: "ghs_x", Comments: map[int][]map[string]any{}, Pulls: map[int]testenv.PullRequest{7: {Head: f.head, Base: f.base}, 8: {Head: f.harness, Base: f.base}}}
	srv := httptest.NewServer(f.gh)
	t.Cleanup(srv.Close)
	bin := filepath.Join(work, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "gh"), []byte(standInGH), 0o755)
	os.MkdirAll(filepath.Join(work, "opx-bin"), 0o755)
	if err := os.Symlink(opxBin, filepath.Join(work, "opx-bin", "opx-linux-amd64")); err != nil {
		t.Fatal(err)
	}
	f.env = map[string]string{"PATH": bin + ":" + os.Getenv("PATH"), "HOME": work, "TMPDIR": os.Getenv("TMPDIR"), "OPX_BUSY_LOAD": "1000",
		"GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "o/r", "REPO": "o/r", "GH_TOKEN": "ghs_x",
		"GITHUB_OUTPUT": filepath.Join(work, "github-out"), "GITHUB_ENV": filepath.Join(work, "github-env"),
		"GITHUB_STEP_SUMMARY": filepath.Join(work, "summary.md"), "GITHUB_RUN_ID": "4242", "GITHUB_RUN_ATTEMPT": "1", "RUNNER_TEMP": work,
		"OPERATORX_MEASURE_S": "0.02", "OPERATORX_WARMUP_MIN_S": "0.005"}
	return f
}

// A collaborator's "/opx ab <head>" runs the A/B of the one testlist the change touches
// — merge base against the approved head, on this machine's local runner — and posts one
// comment and one check; a re-run updates both in place; a run whose ab job ended with no
// report posts a failing check, never a green one.
func TestPRWorkflowEndToEnd(t *testing.T) {
	f := newFlow(t)
	code, out := f.step("Pin the head", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "7", "ASSOCIATION": "COLLABORATOR",
		"COMMENT_BODY": "/opx ab " + f.head + "\nthanks!"})
	if code != 0 || f.env["PR"] != "7" || f.env["HEAD_SHA"] != f.head || f.env["BASE_SHA"] != f.base {
		t.Fatalf("approve: exit %d, env %v\n%s", code, f.env, out)
	}
	if code, out := f.step("Pin the approved head and find the merge base", nil); code != 0 || f.env["MERGE_BASE"] != f.base {
		t.Fatalf("merge base: exit %d %q\n%s", code, f.env["MERGE_BASE"], out)
	}
	sel := map[string]string{"OPX": opxBin, "OPERATORX_RUNNER": "local", "OPERATORX_BACKENDS": "cpu", "OPERATORX_TESTLISTS": "ab_smoke,other", "OPERATORX_HARNESS_PATH": "operatorx", "OPERATORX_MAX_PARALLEL": "4"}
	code, out = f.step("Plan the cases the change touches", sel)
	if code != 0 || !strings.Contains(out, "testlist ab_smoke: testlists/ab_smoke.json changed") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	code, out = f.step("Measure the merge base and the head side by side", sel)
	if code != 0 || !strings.Contains(out, "A/B: success") {
		t.Fatalf("the A/B: exit %d\n%s", code, out)
	}
	rep, err := ab.ReadReport(t.Context(), filepath.Join(f.work, "opx-ab", "ab.json"))
	// the cases are the merge base's (the head's new fp64 case has no base to compare with)
	if err != nil || len(rep.Cases) != 2 || !strings.HasPrefix(rep.Base, "tree pr/operatorx at "+f.base[:12]) || !strings.HasPrefix(rep.Head, "tree pr/operatorx at "+f.head[:12]) {
		t.Fatalf("the report: %v, %d cases (only ab_smoke's at the merge base), base %q head %q", err, len(rep.Cases), rep.Base, rep.Head)
	}
	// the artifact hand-over: the one file, to the post job
	os.MkdirAll(filepath.Join(f.work, "opx-ab-report"), 0o755)
	b, _ := os.ReadFile(filepath.Join(f.work, "opx-ab", "ab.json"))
	os.WriteFile(filepath.Join(f.work, "opx-ab-report", "ab.json"), b, 0o644)
	post := map[string]string{"GITHUB_TOKEN": "ghs_x", "AB_RESULT": "success"}
	for i := range 2 { // a re-run updates, never adds
		t0 := time.Now()
		if code, out := f.step("Post", post); code != 0 {
			t.Fatalf("post: exit %d\n%s", code, out)
		}
		t.Logf("the post step (%s): %.3f s", map[int]string{0: "created", 1: "updated"}[i], time.Since(t0).Seconds()) // a figure for docs/pr.md, not a test
	}
	if len(f.gh.Comments[7]) != 1 || len(f.gh.Checks) != 1 || f.gh.Checks[0]["conclusion"] != "success" || f.gh.Checks[0]["head_sha"] != f.head || len(f.gh.Refused) != 0 {
		t.Fatalf("%d comments, checks %v, refused %v", len(f.gh.Comments[7]), f.gh.Checks, f.gh.Refused)
	}
	if body := f.gh.Comments[7][0]["body"].(string); !strings.HasPrefix(body, ab.Marker) || !strings.Contains(body, `"dtype": "fp32"`) || strings.Contains(body, `"dtype": "fp64"`) {
		t.Errorf("the comment:\n%s", body)
	}
	// the ab job failed before any report: the check fails, saying nothing was measured
	os.RemoveAll(filepath.Join(f.work, "opx-ab-report"))
	code, out = f.step("Post", map[string]string{"GITHUB_TOKEN": "ghs_x", "AB_RESULT": "failure"})
	if code != 1 || len(f.gh.Checks) != 1 || f.gh.Checks[0]["conclusion"] != "failure" || len(f.gh.Comments[7]) != 1 {
		t.Fatalf("post with no report after a failed ab job: exit %d, checks %v\n%s", code, f.gh.Checks, out)
	}
	// nothing this change touches in the selection: nothing planned, measured or posted
	requests := f.gh.Requests
	os.Remove(filepath.Join(f.work, "opx-ab-manifest.json"))
	sel["OPERATORX_TESTLISTS"] = "other"
	if code, out := f.step("Plan the cases the change touches", sel); code != 0 || fileExists(filepath.Join(f.work, "opx-ab-manifest.json")) {
		t.Fatalf("a change outside the selection: exit %d\n%s", code, out)
	}
	os.RemoveAll(filepath.Join(f.work, "opx-ab"))
	if code, out := f.step("Measure the merge base and the head side by side", sel); code != 0 || fileExists(filepath.Join(f.work, "opx-ab")) {
		t.Fatalf("measure with no manifest: exit %d\n%s", code, out)
	}
	os.RemoveAll(filepath.Join(f.work, "opx-ab-report")) // no artifact
	if code, _ := f.step("Post", post); code != 0 || f.gh.Requests != requests {
		t.Errorf("post with nothing measured and a successful ab job: exit %d, %d requests", code, f.gh.Requests-requests)
	}
}

// A pull request that changes the harness alone runs the smoke list the repository's
// platform config maps that path to (as the merge base has the config), each side on its
// own commit's tree.
func TestPRWorkflowHarnessChange(t *testing.T) {
	f := newFlow(t)
	if code, out := f.step("Pin the head", map[string]string{"EVENT": "pull_request_target", "LABEL_PR": "8", "LABEL_HEAD": f.harness, "LABEL_BASE": f.base}); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if code, out := f.step("Pin the approved head and find the merge base", nil); code != 0 {
		t.Fatalf("merge base: exit %d\n%s", code, out)
	}
	sel := map[string]string{"OPX": opxBin, "OPERATORX_RUNNER": "local", "OPERATORX_BACKENDS": "cpu", "OPERATORX_TESTLISTS": "other,ab_smoke",
		"OPERATORX_HARNESS_PATH": "operatorx", "OPERATORX_PLATFORM_CONFIG": "opx-platforms.json", "OPERATORX_MAX_PARALLEL": "4"}
	code, out := f.step("Plan the cases the change touches", sel)
	if code != 0 || !strings.Contains(out, "backend cpu: operatorx/__init__.py changed (harness path operatorx/)") || !strings.Contains(out, "their smoke testlists: ab_smoke") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	code, out = f.step("Measure the merge base and the head side by side", sel)
	if code != 0 {
		t.Fatalf("the A/B: exit %d\n%s", code, out)
	}
	rep, err := ab.ReadReport(t.Context(), filepath.Join(f.work, "opx-ab", "ab.json"))
	if err != nil || len(rep.Cases) != 2 || !strings.Contains(rep.Head, f.harness[:12]) {
		t.Fatalf("the report: %v, %d cases (ab_smoke's two at the base), head %q", err, len(rep.Cases), rep.Head)
	}
	// without the config, a harness change moves every case of the selection
	os.Remove(filepath.Join(f.work, "opx-ab-manifest.json"))
	sel["OPERATORX_PLATFORM_CONFIG"] = ""
	if code, out := f.step("Plan the cases the change touches", sel); code != 0 || !strings.Contains(out, "every case: operatorx/__init__.py changed") {
		t.Fatalf("plan without the mapping: exit %d\n%s", code, out)
	}
}

// Only a maintainer's act starts it, and only for the head they approved.
func TestPRWorkflowApproval(t *testing.T) {
	f := newFlow(t)
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // in the output; "" for success
	}{
		{"a label", map[string]string{"EVENT": "pull_request_target", "LABEL_PR": "7", "LABEL_HEAD": f.head, "LABEL_BASE": f.base}, ""},
		{"a contributor's comment", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "7", "ASSOCIATION": "CONTRIBUTOR", "COMMENT_BODY": "/opx ab " + f.head}, "only the repository's owner, members and collaborators"},
		{"a comment naming no commit", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "7", "ASSOCIATION": "MEMBER", "COMMENT_BODY": "/opx ab please"}, "write /opx ab <the head commit's full 40-digit SHA>"},
		{"a comment naming the head by a prefix", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "7", "ASSOCIATION": "MEMBER", "COMMENT_BODY": "/opx ab " + f.head[:12]}, "full 40-digit SHA"},
		{"a comment naming an older head", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "7", "ASSOCIATION": "OWNER", "COMMENT_BODY": "/opx ab " + f.base}, "not " + f.base + ": approve the head as it is now"},
		{"a comment on no pull request GitHub knows", map[string]string{"EVENT": "issue_comment", "COMMENT_PR": "9", "ASSOCIATION": "OWNER", "COMMENT_BODY": "/opx ab " + f.head}, "404"},
	} {
		delete(f.env, "PR")
		delete(f.env, "HEAD_SHA")
		code, out := f.step("Pin the head", c.env)
		switch {
		case c.want == "" && (code != 0 || f.env["HEAD_SHA"] != f.head || f.env["PR"] != "7"):
			t.Errorf("%s: exit %d, head %q\n%s", c.name, code, f.env["HEAD_SHA"], out)
		case c.want != "" && (code == 0 || !strings.Contains(out, c.want) || f.env["HEAD_SHA"] != ""):
			t.Errorf("%s: exit %d, head %q, want refused with %q\n%s", c.name, code, f.env["HEAD_SHA"], c.want, out)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
