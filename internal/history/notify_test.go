package history_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/testenv"
)

// slackHook is a recording stand-in for a Slack incoming webhook, answering as Slack's
// documentation says one answers (https://api.slack.com/messaging/webhooks, "Handling
// errors"): 200 "ok"; 400 "invalid_payload" to a body that is not a JSON object with a
// "text" string or with blocks Slack would refuse (a section's mrkdwn text over 3,000
// characters); 404 "no_service" off its path. fail answers every post with that status
// instead (500, or 429 with "Retry-After: 1").
type slackHook struct {
	mu    sync.Mutex
	path  string
	fail  int
	posts []map[string]any
	tries int
}

// set sets what the hook answers and forgets what it was sent (the test's writes, under
// its lock: its server reads them).
func (h *slackHook) set(fail int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail, h.tries, h.posts = fail, 0, nil
}

// seen is how many posts it took and how many requests it had.
func (h *slackHook) seen() (posts []map[string]any, tries int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.posts), h.tries
}

func (h *slackHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if r.Method != http.MethodPost || r.URL.Path != h.path {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "no_service")
		return
	}
	if h.fail != 0 {
		if h.fail == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(h.fail)
		io.WriteString(w, "rollup_error")
		return
	}
	var msg map[string]any
	b, _ := io.ReadAll(r.Body)
	text, ok := "", false
	if json.Unmarshal(b, &msg) == nil {
		text, ok = msg["text"].(string)
	}
	if !ok || text == "" || r.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(r.Header.Get("User-Agent"), "opx/") {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "invalid_payload")
		return
	}
	if blocks, _ := msg["blocks"].([]any); msg["blocks"] != nil {
		for _, b := range blocks {
			sec, _ := b.(map[string]any)
			t, _ := sec["text"].(map[string]any)
			s, _ := t["text"].(string)
			if sec["type"] != "section" || t["type"] != "mrkdwn" || s == "" || len(s) > 3000 {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "invalid_blocks")
				return
			}
		}
	}
	h.posts = append(h.posts, msg)
	io.WriteString(w, "ok")
}

// opx history notify tells a webhook of each new alert group once: the groups of a step at
// the newest run, each in one Slack message that links the dashboard; the same check
// again tells nothing; a webhook that fails is tried again (3 tries), said, never fatal,
// and told on the next notify; the JSON form carries the group and its changes; a
// webhook's first notify over a store whose changes are old tells nothing and takes them
// as known; a URL that is not https (or loopback) is a usage error before the store is
// opened.
func TestNotifyTellsEachGroupOnce(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	s, err := history.Open(t.Context(), dsn, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Generate(t.Context(), history.Generated{Runs: 8, Cases: 60, Clusters: []string{"h200_dgxc_8x", "mi355x_amds_8x"}, StepAt: 7, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := s.NewestCheck(t.Context())
	s.Close()
	if err != nil || len(f.Alerts) == 0 {
		t.Fatalf("the store's check has no alert group: %v", err)
	}
	hook := &slackHook{path: "/services/T0/B0/SECRETSECRET"}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	notify := func(env []string, args ...string) testenv.Outcome {
		cmd := exec.Command(opxBin, append([]string{"history", "notify", "--db", dsn}, args...)...)
		cmd.Env = append(os.Environ(), "OPX_SERVE_URL=https://opx.example.com/", "GITHUB_ACTIONS=")
		cmd.Env = append(cmd.Env, env...)
		return testenv.Run(cmd)
	}
	url := srv.URL + hook.path
	// a failing webhook: tried 3 times a group, said, exit 0, nothing recorded
	hook.set(http.StatusInternalServerError)
	o := notify(nil, "--webhook", url, "--format", "slack")
	_, tries := hook.seen()
	if o.Code != 0 || tries != 3*len(f.Alerts) || !strings.Contains(o.Stderr, "not told: posting to 127.0.0.1") || !strings.Contains(o.Stderr, "500 Internal Server Error: rollup_error") ||
		strings.Contains(o.Stderr+o.Stdout, "SECRET") {
		t.Fatalf("a failing webhook: exit %d, %d tries for %d groups\n%s", o.Code, tries, len(f.Alerts), o.Stderr)
	}
	// that first notify is recorded though its posts failed: on a later night, when the
	// groups are no longer new, they are still told (not taken as known)
	if s, err = history.Open(t.Context(), dsn, false, 0); err != nil {
		t.Fatal(err)
	}
	later, err := s.NewestCheck(t.Context())
	for i := range later.Changes {
		later.Changes[i].New = false
	}
	news, known, err2 := s.Unannounced(t.Context(), later, history.Target(url))
	s.Close()
	if err != nil || err2 != nil || len(news) != len(f.Alerts) || len(known) != 0 {
		t.Errorf("after a first notify whose posts failed, a later night: %d new, %d known of %d (%v %v)", len(news), len(known), len(f.Alerts), err, err2)
	}
	// then it answers: every group told, once each, from the webhook set in the environment
	hook.set(0)
	o = notify([]string{"OPX_ALERT_WEBHOOK=" + url}, "--format", "slack")
	posts, _ := hook.seen()
	if o.Code != 0 || len(posts) != len(f.Alerts) || !strings.Contains(o.Stderr, "told 127.0.0.1") {
		t.Fatalf("notify: exit %d, %d posts for %d groups\n%s", o.Code, len(posts), len(f.Alerts), o.Stderr)
	}
	for i, msg := range posts {
		text := msg["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"].(string)
		if !strings.Contains(text, "slower") && !strings.Contains(text, "faster") || !strings.Contains(text, "<https://opx.example.com/series?key=") ||
			!strings.Contains(text, "|Open the changes on ") || strings.Contains(msg["text"].(string), "<") {
			t.Errorf("message %d:\n%s", i, text)
		}
	}
	o = notify(nil, "--webhook", url, "--format", "slack")
	if posts, _ = hook.seen(); o.Code != 0 || len(posts) != len(f.Alerts) || !strings.Contains(o.Stderr, " of 0 new alert group(s)") {
		t.Errorf("notify again: exit %d, %d posts in all\n%s", o.Code, len(posts), o.Stderr)
	}
	// another webhook, in JSON: its first notify tells the groups new at the newest run
	hook.set(0)
	o = notify(nil, "--webhook", url+"?json", "--format", "json")
	if posts, _ = hook.seen(); o.Code != 0 || len(posts) != len(f.Alerts) {
		t.Fatalf("json: exit %d, %d posts\n%s", o.Code, len(posts), o.Stderr)
	}
	for _, msg := range posts {
		a, _ := msg["alert"].(map[string]any)
		changes, _ := msg["changes"].([]any)
		if msg["source"] != "opx" || a["id"] == nil || len(changes) == 0 || !strings.HasPrefix(changes[0].(map[string]any)["url"].(string), "https://opx.example.com/series?key=") {
			t.Errorf("a JSON message: %v", msg)
		}
	}
	// a webhook's first notify over a store whose changes are old (a step four runs
	// before the newest): nothing new, the groups that stood before taken as known
	old := filepath.Join(t.TempDir(), "old.db")
	if s, err = history.Open(t.Context(), old, true, 0); err != nil {
		t.Fatal(err)
	}
	err = s.Generate(t.Context(), history.Generated{Runs: 8, Cases: 60, Clusters: []string{"h200_dgxc_8x"}, StepAt: 4, Seed: 5})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	hook.set(0)
	o = notify(nil, "--db", old, "--webhook", url, "--format", "slack")
	if posts, _ = hook.seen(); o.Code != 0 || len(posts) != 0 || !strings.Contains(o.Stderr, "group(s) that stood before taken as known") {
		t.Errorf("a first notify over old changes: exit %d, %d posts\n%s", o.Code, len(posts), o.Stderr)
	}
	for _, bad := range [][]string{{"--webhook", "http://hooks.example.com/x"}, {}, {"--webhook", url, "--format", "xml"}} {
		if o := notify([]string{"OPX_ALERT_WEBHOOK="}, bad...); o.Code != 2 || strings.Contains(o.Stderr, "SECRET") {
			t.Errorf("%v: exit %d %s", bad, o.Code, o.Stderr)
		}
	}
}
