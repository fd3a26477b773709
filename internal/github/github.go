// Package github posts a pull request's verdict through GitHub's REST API with the
// workflow's token (docs.github.com/en/rest, API version 2022-11-28): one issue comment,
// found again by a hidden marker and updated in place, and one check run per name and
// commit, updated in place. Every request goes through webhook.Poster: a spent rate limit
// (403 or 429 with X-RateLimit-Remaining 0) waits for its reset, a 5xx is tried again, a
// 422 (validation failed) or another 4xx fails at once with what GitHub said.
package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/webhook"
)

// Client is the API of one repository with one token.
type Client struct {
	API   string // https://api.github.com (GitHub Enterprise: $GITHUB_API_URL)
	Repo  string // owner/name
	Token string
	// Author is the login the token posts as: its comment is the one updated
	// (github-actions[bot], the workflow's token's, when empty)
	Author string
	Poster webhook.Poster
}

func (c Client) author() string { return cmp.Or(c.Author, "github-actions[bot]") }

// MaxBody is the most a comment's body or a check's summary may hold (GitHub's limit).
const MaxBody = 65536

// MaxAnnotations is the most annotations one request may carry (GitHub's limit).
const MaxAnnotations = 50

var repoName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// Valid is whether the client can be used: a repository owner/name, a token, an https API
// (http only to this machine).
func (c Client) Valid() error {
	if !repoName.MatchString(c.Repo) {
		return fmt.Errorf("the repository %q: give owner/name (default $GITHUB_REPOSITORY)", c.Repo)
	}
	if c.Token == "" {
		return errors.New("no token: set GITHUB_TOKEN (the workflow's token, with pull-requests: write and checks: write)")
	}
	if _, err := webhook.Check(c.api("")); err != nil {
		return fmt.Errorf("the API: %w", err)
	}
	return nil
}

func (c Client) api(path string) string {
	return strings.TrimRight(cmp.Or(c.API, "https://api.github.com"), "/") + path
}

// do sends one request and decodes its answer into out (when not nil); the answer's
// headers are returned (Link).
func (c Client) do(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	h := http.Header{"Accept": {"application/vnd.github+json"}, "Authorization": {"Bearer " + c.Token}, "X-Github-Api-Version": {"2022-11-28"}}
	a, err := c.Poster.Send(ctx, method, c.api(path), body, h)
	if err != nil {
		return nil, fmt.Errorf("GitHub %s %s: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(a.Body, out); err != nil {
			return nil, fmt.Errorf("GitHub %s %s: the answer: %w", method, path, err)
		}
	}
	return a.Header, nil
}

// next is the Link header's rel="next" URL's path and query (pagination), "" at the last
// page.
func (c Client) next(h http.Header) string {
	for _, part := range strings.Split(h.Get("Link"), ",") {
		u, rel, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(rel, `rel="next"`) {
			continue
		}
		p, err := url.Parse(strings.Trim(strings.TrimSpace(u), "<>"))
		if err != nil {
			return ""
		}
		base, _ := url.Parse(c.api(""))
		return strings.TrimPrefix(p.RequestURI(), strings.TrimRight(base.Path, "/"))
	}
	return ""
}

// Truncate cuts a body to GitHub's limit, saying so at its end.
func Truncate(s string) string {
	const note = "\n\n… (cut at GitHub's limit; the run's artifacts hold it all)\n"
	if len(s) <= MaxBody {
		return s
	}
	return safe.Prefix(s, MaxBody-len(note)) + note
}

// Comment is the PR's comment that carries marker, written by the token's login (Author):
// updated in place when one is there, else created. Whether it was created, and its id.
func (c Client) Comment(ctx context.Context, pr int, marker, body string) (bool, int64, error) {
	if !strings.Contains(body, marker) {
		return false, 0, fmt.Errorf("the comment's body lacks its marker %q: it could never be found again", marker)
	}
	body = Truncate(body)
	type comment struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	path := fmt.Sprintf("/repos/%s/issues/%d/comments?per_page=100", c.Repo, pr)
	for path != "" {
		var page []comment
		h, err := c.do(ctx, http.MethodGet, path, nil, &page)
		if err != nil {
			return false, 0, err
		}
		for _, cm := range page {
			if strings.Contains(cm.Body, marker) && cm.User.Login == c.author() { // a person quoting it is not opx
				_, err := c.do(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/issues/comments/%d", c.Repo, cm.ID), map[string]string{"body": body}, nil)
				return false, cm.ID, err
			}
		}
		path = c.next(h)
	}
	var made comment
	_, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", c.Repo, pr), map[string]string{"body": body}, &made)
	return true, made.ID, err
}

// ValidSHA is whether sha is a commit's full SHA (40 hex digits), as a check run's head_sha
// must be.
func ValidSHA(sha string) error {
	if !fullSHA.MatchString(sha) {
		return fmt.Errorf("the head commit %q: give its full SHA (40 hex digits)", sha)
	}
	return nil
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Annotation is one line of a check run's annotations.
type Annotation struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
	Level     string `json:"annotation_level"` // notice, warning or failure
	Title     string `json:"title,omitempty"`
	Message   string `json:"message"`
}

// CheckRun is what a check run says.
type CheckRun struct {
	Name        string
	Conclusion  string // success, failure, neutral
	Title       string
	Summary     string
	Text        string
	Annotations []Annotation
}

// Check is the commit's check run of that name: updated in place when one is there, else
// created (completed, with its conclusion). Annotations go 50 a request; GitHub keeps the
// annotations of every update, so a run that already has some is given no more (its
// summary says the cases now). Whether it was created, and its id.
func (c Client) Check(ctx context.Context, sha string, run CheckRun) (bool, int64, error) {
	if err := ValidSHA(sha); err != nil {
		return false, 0, err
	}
	var list struct {
		CheckRuns []struct {
			ID     int64 `json:"id"`
			Output struct {
				Annotations int `json:"annotations_count"`
			} `json:"output"`
		} `json:"check_runs"`
	}
	if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/repos/%s/commits/%s/check-runs?check_name=%s", c.Repo, sha, url.QueryEscape(run.Name)), nil, &list); err != nil {
		return false, 0, err
	}
	anns := run.Annotations
	output := func(batch []Annotation) map[string]any {
		o := map[string]any{"title": run.Title, "summary": Truncate(run.Summary)}
		if run.Text != "" {
			o["text"] = Truncate(run.Text)
		}
		if len(batch) > 0 {
			o["annotations"] = batch
		}
		return o
	}
	first := anns[:min(len(anns), MaxAnnotations)]
	body := map[string]any{"name": run.Name, "status": "completed", "conclusion": run.Conclusion, "completed_at": time.Now().UTC().Format(time.RFC3339)}
	var id int64
	created := len(list.CheckRuns) == 0
	if created {
		body["head_sha"], body["output"] = sha, output(first)
		var made struct {
			ID int64 `json:"id"`
		}
		if _, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/check-runs", c.Repo), body, &made); err != nil {
			return false, 0, err
		}
		id = made.ID
	} else {
		id = list.CheckRuns[0].ID
		if list.CheckRuns[0].Output.Annotations > 0 {
			anns, first = nil, nil
		}
		body["output"] = output(first)
		if _, err := c.do(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/check-runs/%d", c.Repo, id), body, nil); err != nil {
			return false, id, err
		}
	}
	for i := MaxAnnotations; i < len(anns); i += MaxAnnotations {
		if _, err := c.do(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/check-runs/%d", c.Repo, id), map[string]any{"output": output(anns[i:min(len(anns), i+MaxAnnotations)])}, nil); err != nil {
			return created, id, err
		}
	}
	return created, id, nil
}
