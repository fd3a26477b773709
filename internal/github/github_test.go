package github_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/github"
	"github.com/semianalysis/opx/internal/testenv"
	"github.com/semianalysis/opx/internal/webhook"
)

func fakeGitHub(t *testing.T) (*testenv.GitHub, github.Client) {
	f := &testenv.GitHub{Token: "ghs_test", Comments: map[int][]map[string]any{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, github.Client{API: srv.URL, Repo: "o/r", Token: "ghs_test", Poster: webhook.Poster{Wait: time.Millisecond}}
}

// One comment per PR: created once, then found by its marker (on the second page of 150
// comments) and updated in place; another comment is never touched.
func TestOneCommentUpdatedInPlace(t *testing.T) {
	f, c := fakeGitHub(t)
	const marker = "<!-- opx-pr-ab -->"
	for i := range 150 {
		body := fmt.Sprintf("a reviewer's comment %d", i)
		if i == 3 {
			body = "quoting opx: " + marker // a person's: never opx's to update
		}
		f.Comments[7] = append(f.Comments[7], map[string]any{"id": int64(1000 + i), "body": body, "user": map[string]any{"login": "someone", "type": "User"}})
	}
	created, id, err := c.Comment(t.Context(), 7, marker, marker+"\nfirst")
	if err != nil || !created {
		t.Fatalf("first: created %t, %v", created, err)
	}
	f.Limited = true // the next request finds the rate limit spent: waited for, then done
	created, id2, err := c.Comment(t.Context(), 7, marker, marker+"\nsecond")
	if err != nil || created || id2 != id {
		t.Fatalf("second: created %t, id %d (first %d), %v", created, id2, id, err)
	}
	if n := len(f.Comments[7]); n != 151 || f.Comments[7][150]["body"] != marker+"\nsecond" || f.Comments[7][0]["body"] != "a reviewer's comment 0" || f.Comments[7][3]["body"] != "quoting opx: "+marker {
		t.Errorf("%d comments; the opx one: %v", n, f.Comments[7][150]["body"])
	}
	if _, _, err := c.Comment(t.Context(), 7, marker, "no marker"); err == nil {
		t.Error("a body without its marker was posted")
	}
	long := marker + strings.Repeat("é", github.MaxBody)
	if _, _, err := c.Comment(t.Context(), 7, marker, long); err != nil || len(f.Refused) != 0 {
		t.Errorf("a body over GitHub's limit: %v %v", err, f.Refused)
	}
}

// One check per commit and name: created completed with its conclusion and annotations (50
// a request), then updated in place; a 422 is said with GitHub's message.
func TestOneCheckUpdatedInPlace(t *testing.T) {
	f, c := fakeGitHub(t)
	sha := strings.Repeat("ab", 20)
	var anns []github.Annotation
	for i := range 120 {
		anns = append(anns, github.Annotation{Path: "x.yml", StartLine: 1, EndLine: 1, Level: "failure", Title: fmt.Sprint(i), Message: "slower"})
	}
	created, id, err := c.Check(t.Context(), sha, github.CheckRun{Name: "opx A/B", Conclusion: "failure", Title: "120 slower", Summary: "s", Annotations: anns})
	if err != nil || !created || len(f.Checks) != 1 || len(f.Annotations[id]) != 120 || len(f.Refused) != 0 {
		t.Fatalf("created %t, %d checks, %d annotations, refused %v: %v", created, len(f.Checks), len(f.Annotations[id]), f.Refused, err)
	}
	created, id2, err := c.Check(t.Context(), sha, github.CheckRun{Name: "opx A/B", Conclusion: "success", Title: "none", Summary: "s2", Annotations: anns[:3]})
	if err != nil || created || id2 != id || len(f.Checks) != 1 || f.Checks[0]["conclusion"] != "success" || len(f.Annotations[id]) != 120 {
		t.Errorf("re-run: created %t, %d checks, conclusion %v, %d annotations: %v", created, len(f.Checks), f.Checks[0]["conclusion"], len(f.Annotations[id]), err)
	}
	_, _, err = c.Check(t.Context(), sha, github.CheckRun{Name: "other", Conclusion: "success", Summary: "s"})
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "Validation Failed") {
		t.Errorf("a check without a title: %v", err)
	}
	if _, _, err := c.Check(t.Context(), "abc", github.CheckRun{Name: "x"}); err == nil {
		t.Error("a short SHA was taken")
	}
}

func TestValid(t *testing.T) {
	for _, c := range []github.Client{{Repo: "o", Token: "t"}, {Repo: "o/r"}, {Repo: "o/r", Token: "t", API: "http://example.com"}, {Repo: "o/r; rm", Token: "t"}} {
		if c.Valid() == nil {
			t.Errorf("%+v taken", c)
		}
	}
	if err := (github.Client{Repo: "o/r", Token: "t"}).Valid(); err != nil {
		t.Error(err)
	}
}
