package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/github"
)

// GitHub is a recording stand-in for the GitHub REST API's endpoints opx uses, answering as
// the documentation says (docs.github.com/en/rest: issues/comments "List issue comments",
// "Create an issue comment", "Update an issue comment"; checks/runs "List check runs for
// a Git reference", "Create a check run", "Update a check run"): it checks each request's
// method, path, headers (a bearer token, Accept application/vnd.github+json,
// X-GitHub-Api-Version 2022-11-28, a User-Agent) and JSON fields, answers 201 to a create
// and 200 to an update, 422 "Validation Failed" to what GitHub refuses (an empty or too
// long body, a check without title or summary, a completed check without a conclusion,
// more than 50 annotations, an annotation without path, lines, level or message, or with a title over 255 characters),
// paginates comments 100 a page with a Link header, and can answer its first request with
// a spent rate limit (403, X-RateLimit-Remaining 0). Pulls answers pulls "Get a pull
// request" (GET /repos/o/r/pulls/N: the documented object's number, state, head and base,
// each with its sha and ref) for the workflow's gh.
type GitHub struct {
	Pulls       map[int]PullRequest
	mu          sync.Mutex
	Token       string
	Comments    map[int][]map[string]any // by PR, oldest first
	Checks      []map[string]any
	Annotations map[int64][]github.Annotation
	Limited     bool // the next request finds the rate limit spent
	Requests    int
	Refused     []string
	nextID      int64
}

// PullRequest is a pull request's head and base commits.
type PullRequest struct{ Head, Base string }

func (f *GitHub) refuse(w http.ResponseWriter, why string) {
	f.Refused = append(f.Refused, why)
	w.WriteHeader(http.StatusUnprocessableEntity)
	fmt.Fprintf(w, `{"message":"Validation Failed","errors":[{"message":%q}],"documentation_url":"https://docs.github.com/rest"}`, why)
}

func (f *GitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Requests++
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if f.Limited {
		f.Limited = false
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded for installation.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.Token {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"Bad credentials"}`)
		return
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" || r.Header.Get("User-Agent") == "" {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"message":"headers"}`)
		return
	}
	var in map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"message":"Problems parsing JSON"}`)
			return
		}
	}
	p := r.URL.Path
	if m := regexp.MustCompile(`^/repos/o/r/pulls/(\d+)$`).FindStringSubmatch(p); m != nil && r.Method == http.MethodGet {
		n, _ := strconv.Atoi(m[1])
		pr, ok := f.Pulls[n]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/pulls/pulls#get-a-pull-request"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"url": "https://api.github.com/repos/o/r/pulls/" + m[1], "number": n, "state": "open",
			"head": map[string]any{"label": "fork:feature", "ref": "feature", "sha": pr.Head}, "base": map[string]any{"label": "o:main", "ref": "main", "sha": pr.Base}})
		return
	}
	if m := regexp.MustCompile(`^/repos/o/r/issues/(\d+)/comments$`).FindStringSubmatch(p); m != nil {
		pr, _ := strconv.Atoi(m[1])
		switch r.Method {
		case http.MethodGet:
			page, _ := strconv.Atoi(r.URL.Query().Get("page"))
			per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
			page, per = max(page, 1), min(max(per, 1), 100)
			all := f.Comments[pr]
			from := min((page-1)*per, len(all))
			to := min(from+per, len(all))
			if to < len(all) {
				w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?per_page=%d&page=%d>; rel="next", <http://%s%s?per_page=%d&page=%d>; rel="last"`, r.Host, p, per, page+1, r.Host, p, per, (len(all)+per-1)/per))
			}
			json.NewEncoder(w).Encode(all[from:to])
		case http.MethodPost:
			body, _ := in["body"].(string)
			if body == "" || len(body) > github.MaxBody {
				f.refuse(w, "body is empty or too long")
				return
			}
			f.nextID++
			c := map[string]any{"id": f.nextID, "body": body, "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}}
			f.Comments[pr] = append(f.Comments[pr], c)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(c)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
		return
	}
	if m := regexp.MustCompile(`^/repos/o/r/issues/comments/(\d+)$`).FindStringSubmatch(p); m != nil && r.Method == http.MethodPatch {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		body, _ := in["body"].(string)
		if body == "" || len(body) > github.MaxBody {
			f.refuse(w, "body is empty or too long")
			return
		}
		for _, cs := range f.Comments {
			for _, c := range cs {
				if c["id"] == id {
					c["body"] = body
					json.NewEncoder(w).Encode(c)
					return
				}
			}
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Not Found"}`)
		return
	}
	if m := regexp.MustCompile(`^/repos/o/r/commits/([0-9a-f]{40})/check-runs$`).FindStringSubmatch(p); m != nil && r.Method == http.MethodGet {
		var runs []map[string]any
		for _, c := range f.Checks {
			if c["head_sha"] == m[1] && (r.URL.Query().Get("check_name") == "" || c["name"] == r.URL.Query().Get("check_name")) {
				runs = append(runs, map[string]any{"id": c["id"], "name": c["name"], "output": map[string]any{"annotations_count": len(f.Annotations[c["id"].(int64)])}})
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"total_count": len(runs), "check_runs": runs})
		return
	}
	create := p == "/repos/o/r/check-runs" && r.Method == http.MethodPost
	m := regexp.MustCompile(`^/repos/o/r/check-runs/(\d+)$`).FindStringSubmatch(p)
	if !create && (m == nil || r.Method != http.MethodPatch) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Not Found"}`)
		return
	}
	out, _ := in["output"].(map[string]any)
	if create && (in["name"] == nil || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(fmt.Sprint(in["head_sha"]))) {
		f.refuse(w, "name and head_sha are required")
		return
	}
	if in["status"] == "completed" && in["conclusion"] == nil {
		f.refuse(w, "conclusion is required when status is completed")
		return
	}
	if out != nil && (out["title"] == nil || out["title"] == "" || out["summary"] == nil || out["summary"] == "") {
		f.refuse(w, "output needs a title and a summary")
		return
	}
	var anns []github.Annotation
	if out != nil && out["annotations"] != nil {
		b, _ := json.Marshal(out["annotations"])
		json.Unmarshal(b, &anns)
		if len(anns) > github.MaxAnnotations {
			f.refuse(w, "at most 50 annotations a request")
			return
		}
		for _, a := range anns {
			if a.Path == "" || a.StartLine < 1 || a.EndLine < a.StartLine || a.Message == "" || len([]rune(a.Title)) > 255 || (a.Level != "notice" && a.Level != "warning" && a.Level != "failure") {
				f.refuse(w, "an annotation lacks its path, lines, level or message")
				return
			}
		}
	}
	var id int64
	if create {
		f.nextID++
		id = f.nextID
		in["id"] = id
		f.Checks = append(f.Checks, in)
		w.WriteHeader(http.StatusCreated)
	} else {
		id, _ = strconv.ParseInt(m[1], 10, 64)
		found := false
		for _, c := range f.Checks {
			if c["id"] == id {
				for k, v := range in {
					c[k] = v
				}
				found = true
			}
		}
		if !found {
			w.WriteHeader(http.StatusNotFound)
			return
		}
	}
	if f.Annotations == nil {
		f.Annotations = map[int64][]github.Annotation{}
	}
	f.Annotations[id] = append(f.Annotations[id], anns...) // GitHub appends each update's
	json.NewEncoder(w).Encode(map[string]any{"id": id})
}
