package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/testenv"
)

// abReport writes an A/B report of cases judged from simulated pairs (1% noise): each
// case's head ratio times its base, n pairs.
func abReport(t *testing.T, dir string, ratios []float64, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	r := ab.Report{Base: "base 1111111", Head: "head 2222222", Rules: ab.Defaults}
	for i, ratio := range ratios {
		var pairs []ab.Pair
		for range n {
			pairs = append(pairs, ab.Pair{Base: 100 * math.Exp(rng.NormFloat64()*0.01), Head: 100 * ratio * math.Exp(rng.NormFloat64()*0.01)})
		}
		res, err := ab.Judge(pairs, true, ab.Defaults)
		if err != nil {
			t.Fatal(err)
		}
		r.Cases = append(r.Cases, ab.Case{Key: "gemm|case-" + string(rune('a'+i)) + strings.Repeat("|m=4096", 60*max(0, 1-i)), Testlist: "gemm_perf", Metric: "latency_us", Lower: true, Outcome: "measured", Result: res})
	}
	b, _ := json.Marshal(r)
	p := filepath.Join(dir, "ab.json")
	os.WriteFile(p, b, 0o644)
	return p
}

// opx github report posts the PR's one comment and the head's one check, against a
// recording GitHub that answers as its documentation says: a case 8% slower fails the
// check (exit 1) with an annotation; a re-run updates both in place; a clean report
// passes; bad input is said before anything is posted.
func TestGitHubReportPostsOneCommentAndOneCheck(t *testing.T) {
	gh := &testenv.GitHub{Token: "ghs_x", Comments: map[int][]map[string]any{}}
	srv := httptest.NewServer(gh)
	defer srv.Close()
	dir := t.TempDir()
	sha := strings.Repeat("0a", 20)
	run := func(env map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		getenv := func(k string) string { return env[k] }
		code := Main(context.Background(), append([]string{"github", "report"}, args...), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: getenv, Environ: func() []string { return nil }})
		return code, errb.String()
	}
	env := map[string]string{"GITHUB_API_URL": srv.URL, "GITHUB_TOKEN": "ghs_x", "GITHUB_REPOSITORY": "o/r"}
	slow := abReport(t, dir, []float64{1.08, 1, 1.005}, 10)
	code, msg := run(env, "--report", slow, "--pr", "5", "--sha", sha)
	if code != 1 || !strings.Contains(msg, "comment on pull request 5 created") || !strings.Contains(msg, "created (id") || !strings.Contains(msg, "failure, 1 case(s) slower beyond 2%") {
		t.Fatalf("a slower case: exit %d\n%s", code, msg)
	}
	if len(gh.Comments[5]) != 1 || len(gh.Checks) != 1 || gh.Checks[0]["conclusion"] != "failure" || len(gh.Refused) != 0 {
		t.Fatalf("%d comments, %d checks, refused %v", len(gh.Comments[5]), len(gh.Checks), gh.Refused)
	}
	body := gh.Comments[5][0]["body"].(string)
	if !strings.HasPrefix(body, ab.Marker) || !strings.Contains(body, "### Slower (1)") || !strings.Contains(body, "**yes**") || !strings.Contains(body, "gemm\\|case-a") {
		t.Errorf("the comment:\n%s", body)
	}
	for _, a := range gh.Annotations {
		if len(a) != 1 || a[0].Level != "failure" || !strings.Contains(a[0].Title, "case-a") {
			t.Errorf("annotations: %+v", a)
		}
	}
	clean := abReport(t, t.TempDir(), []float64{1, 1, 0.99}, 20)
	code, msg = run(env, "--report", clean, "--pr", "5", "--sha", sha)
	if code != 0 || !strings.Contains(msg, "updated in place") || len(gh.Comments[5]) != 1 || len(gh.Checks) != 1 || gh.Checks[0]["conclusion"] != "success" {
		t.Errorf("a clean re-run: exit %d, %d comments, %d checks, %v\n%s", code, len(gh.Comments[5]), len(gh.Checks), gh.Checks[0]["conclusion"], msg)
	}
	requests := gh.Requests
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"cases": [{"key": 3}]}`), 0o644)
	for _, c := range []struct {
		env  map[string]string
		args []string
		code int
		says string
	}{
		{env, []string{"--report", slow, "--pr", "0", "--sha", sha}, 2, "--pr N"},
		{map[string]string{"GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "o/r"}, []string{"--report", slow, "--pr", "5", "--sha", sha}, 2, "GITHUB_TOKEN"},
		{env, []string{"--report", bad, "--pr", "5", "--sha", sha}, 1, "bad.json: not an A/B report"},
		{env, []string{"--report", slow, "--pr", "5", "--sha", "abc"}, 2, "full SHA"},
	} {
		if code, msg := run(c.env, c.args...); code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s", c.args, code, c.code, c.says, msg)
		}
	}
	if gh.Requests != requests {
		t.Errorf("bad input made %d requests to GitHub", gh.Requests-requests)
	}
}
