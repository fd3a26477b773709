package serve_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/serve"
	"github.com/semianalysis/opx/internal/testenv"
)

// server is an opx serve started over a store on a free port.
type server struct {
	t    *testing.T
	base string
	stop func() error
}

func start(t *testing.T, dsn string, o serve.Options) *server {
	t.Helper()
	s, err := history.OpenReader(t.Context(), dsn, 0) // as opx serve opens it: to read (and write triage events)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	o.Store, o.Where, o.Ready = s, s.Where, func(a string) { ready <- a }
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, o) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		s.Close()
		t.Fatalf("serve: %v", err)
	}
	sv := &server{t: t, base: "http://" + addr}
	var once sync.Once
	var stopErr error
	sv.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
			s.Close()
		})
		return stopErr
	}
	t.Cleanup(func() { sv.stop() })
	return sv
}

// do is a request with an optional bearer token: the status, the body, the headers.
func (s *server) do(method, path, token string, body io.Reader) (int, string, http.Header) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.base+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (s *server) get(path, token string) (int, string, http.Header) {
	s.t.Helper()
	return s.do("GET", path, token, nil)
}

func (s *server) triage(id, token, body string) (int, string) {
	s.t.Helper()
	code, b, _ := s.do("POST", "/api/changes/"+id+"/triage", token, strings.NewReader(body))
	return code, b
}

// generated is a store of 8 nightly runs of 60 GEMM cases on two clusters, four series
// (cases 0 and 50 on each) 1.3x slower from the newest run.
func generated(t *testing.T, dsn string) {
	s, err := history.Open(t.Context(), dsn, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Generate(t.Context(), history.Generated{Runs: 8, Cases: 60, Clusters: []string{"h200_dgxc_8x", "mi355x_amds_8x"}, StepAt: 7, Seed: 3}); err != nil {
		t.Fatal(err)
	}
}

// generateInto adds generated runs to the store at dsn (made when it is not there).
func generateInto(t *testing.T, dsn string, g history.Generated) {
	t.Helper()
	s, err := history.Open(t.Context(), dsn, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Generate(t.Context(), g); err != nil {
		t.Fatal(err)
	}
}

const token = "ci-bot:0123456789abcdef0123"

func tokens(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(p, []byte("# the team's tokens\n\n"+token+"\nfedcba9876543210fedc\n"), 0o600)
	return p
}

type changesDoc struct {
	Newest   string           `json:"newest_run"`
	Changes  []history.Change `json:"changes"`
	Clusters map[string]int   `json:"changes_per_cluster"`
}

// Every page and API over SQLite and PostgreSQL: the changes of the newest run (filtered),
// a series with its plot, points and the case on the other cluster, the runs and a run's
// cases, two runs compared, health; every response with the security headers.
func TestPagesAndAPI(t *testing.T) {
	for _, dsn := range []string{filepath.Join(t.TempDir(), "h.db"), testenv.Postgres(t)} {
		generated(t, dsn)
		sv := start(t, dsn, serve.Options{TokenFile: tokens(t)})
		code, body, h := sv.get("/", "")
		if code != 200 || !strings.Contains(body, `id="changes"`) || strings.Count(body, `class="series"`) != 4 {
			t.Fatalf("/: %d\n%s", code, body)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY"} {
			if h.Get(k) != want {
				t.Errorf("%s: %q, want %q", k, h.Get(k), want)
			}
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP %q", csp)
		}
		var doc changesDoc
		_, body, _ = sv.get("/api/changes", "")
		if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Changes) != 4 || doc.Clusters["h200_dgxc_8x"] != 2 || doc.Clusters["mi355x_amds_8x"] != 2 ||
			!strings.HasPrefix(doc.Newest, "nightly-8 of ") || doc.Changes[0].Direction != "slower" || doc.Changes[0].Triage != "open" {
			t.Fatalf("/api/changes: %v %s", err, body)
		}
		for q, n := range map[string]int{"?cluster=mi355x_amds_8x": 2, "?state=acknowledged": 0, "?op=gemm&backend=vllm": 4, "?testlist=nope": 0} {
			var f changesDoc
			_, b, _ := sv.get("/api/changes"+q, "")
			if json.Unmarshal([]byte(b), &f); len(f.Changes) != n {
				t.Errorf("/api/changes%s: %d changes, want %d", q, len(f.Changes), n)
			}
		}
		key := doc.Changes[0].Key
		code, body, _ = sv.get("/series?key="+url.QueryEscape(key), "")
		if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, `id="`+doc.Changes[0].ID+`"`) || !strings.Contains(body, `id="others"`) {
			t.Errorf("/series: %d\n%.600s", code, body)
		}
		var se history.SeriesView
		_, body, _ = sv.get("/api/series?key="+url.QueryEscape(key), "")
		if err := json.Unmarshal([]byte(body), &se); err != nil || len(se.Points) != 8 || len(se.Changes) != 1 || len(se.Others) != 1 ||
			se.Others[0].Cluster == se.Cluster || se.Others[0].Value == nil || se.Others[0].SOLPct == nil {
			t.Errorf("/api/series: %v %.500s", err, body)
		}
		if code, _, _ := sv.get("/series?key=nope", ""); code != 404 {
			t.Errorf("an unknown series: %d", code)
		}
		// text no store can hold is no such series on both stores, never "does not answer"
		for _, q := range []string{"/series?key=a%00b", "/api/series?key=a%FFb", "/api/series?key=%C3"} {
			if code, body, _ := sv.get(q, ""); code != 404 {
				t.Errorf("%s: %d %s", q, code, body)
			}
		}
		var runs struct{ Runs []history.RunSummary }
		_, body, _ = sv.get("/api/runs", "")
		if err := json.Unmarshal([]byte(body), &runs); err != nil || len(runs.Runs) != 8 || runs.Runs[0].RunID != "nightly-8" || runs.Runs[0].Verdict != "success" ||
			runs.Runs[0].Tally.Measured != 120 || runs.Runs[0].Hours <= 0 || runs.Runs[0].Unit != "GPU" {
			t.Errorf("/api/runs: %v %.400s", err, body)
		}
		if code, body, _ = sv.get("/runs", ""); code != 200 || !strings.Contains(body, "nightly-8") {
			t.Errorf("/runs: %d", code)
		}
		code, body, _ = sv.get("/runs/nightly-8", "")
		if code != 200 || strings.Count(body, `href="/series?key=`) != 120 {
			t.Errorf("/runs/nightly-8: %d, %d cases", code, strings.Count(body, `href="/series?key=`))
		}
		if code, _, _ := sv.get("/runs/nosuch", ""); code != 404 {
			t.Errorf("/runs/nosuch: %d", code)
		}
		// the four stepped cases are the worst regressions, in compare's words
		var cmp struct {
			Counts map[string]int
			Cases  []struct {
				Class   string
				Primary struct{ Change string }
			}
		}
		_, body, _ = sv.get("/api/compare?base=nightly-1&new=nightly-8", "")
		if err := json.Unmarshal([]byte(body), &cmp); err != nil || cmp.Counts["slower"] < 4 || len(cmp.Cases) != 120 {
			t.Fatalf("/api/compare: %v %.400s", err, body)
		}
		for _, c := range cmp.Cases[:4] {
			if c.Class != "slower" || !strings.HasPrefix(c.Primary.Change, "1.3") && !strings.HasPrefix(c.Primary.Change, "1.2") {
				t.Errorf("a stepped case: %+v", c)
			}
		}
		if code, body, _ = sv.get("/compare?base=nightly-1&new=nightly-8", ""); code != 200 || !strings.Contains(body, "1.30x slower") {
			t.Errorf("/compare: %d", code)
		}
		// a comparison asked again is the one kept, the same to the byte
		if _, again, _ := sv.get("/api/compare?base=nightly-1&new=nightly-8", ""); !strings.Contains(again, `"slower"`) || len(again) < 1000 {
			t.Errorf("/api/compare again: %.300s", again)
		}
		compareWindows(t, sv, "/api/compare?base=nightly-1&new=nightly-8", 120)
		// one stored run is never its own baseline
		if code, body, _ = sv.get("/api/compare?base=nightly-8&new=nightly-8", ""); code != 400 || !strings.Contains(body, "the same stored run") {
			t.Errorf("/api/compare of a run with itself: %d %.300s", code, body)
		}
		if code, body, _ = sv.get("/healthz", ""); code != 200 || !strings.HasPrefix(body, "ok\nstore: ") || !strings.Contains(body, "newest run added ") {
			t.Errorf("/healthz: %d %q", code, body)
		}
		// the store is read live: a run added while it serves is on the next page load
		generateInto(t, dsn, history.Generated{Runs: 1, Cases: 60, Clusters: []string{"h200_dgxc_8x", "mi355x_amds_8x"}, Seed: 9,
			From: time.Date(2026, 2, 1, 2, 0, 0, 0, time.UTC)})
		// nightly-1 now names two stored runs: the user must choose
		if code, body, _ = sv.get("/api/compare?base=nightly-1&new=nightly-8", ""); code != 409 {
			t.Errorf("/api/compare after an add: %d %.300s", code, body)
		}
		var after changesDoc
		_, body, _ = sv.get("/api/changes", "")
		if json.Unmarshal([]byte(body), &after); after.Newest != "nightly-1 of 2026-02-01T02:00Z" {
			t.Errorf("after an add: newest %q", after.Newest)
		}
		if err := sv.stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	}
}

// Triage needs a token, on loopback too; without a valid one nothing changes. A triage
// survives a restart, its history kept (who, from, to, note, link), and a change marked
// expected no longer fails the gate while an acknowledged one still does.
func TestTriage(t *testing.T) {
	for _, dsn := range []string{filepath.Join(t.TempDir(), "h.db"), testenv.Postgres(t)} {
		generated(t, dsn)
		tf := tokens(t)
		sv := start(t, dsn, serve.Options{TokenFile: tf})
		var doc changesDoc
		_, body, _ := sv.get("/api/changes", "")
		json.Unmarshal([]byte(body), &doc)
		id := doc.Changes[0].ID
		for _, c := range []struct {
			token, body string
			code        int
		}{
			{"", `{"state": "expected"}`, 401},
			{"wrong-token-0123456789", `{"state": "expected"}`, 401},
			{"0123456789abcdef0123", `{"state": "bogus"}`, 400},
			{"0123456789abcdef0123", `{"state": "expected", "link": "javascript:alert(1)"}`, 400},
			{"0123456789abcdef0123", `{"state": "expected", "extra": 1}`, 400},
			{"0123456789abcdef0123", `{"state": "expected", "note": "` + strings.Repeat("x", 20000) + `"}`, 400},
		} {
			if code, msg := sv.triage(id, c.token, c.body); code != c.code {
				t.Errorf("triage %.60s with %q: %d %q, want %d", c.body, c.token, code, msg, c.code)
			}
		}
		if code, _ := sv.triage("c0000000000000f", "0123456789abcdef0123", `{"state": "expected"}`); code != 404 {
			t.Errorf("an unknown change: %d", code)
		}
		_, body, _ = sv.get("/api/changes", "")
		if !strings.Contains(body, `"triage": "open"`) || strings.Contains(body, `"triage": "expected"`) {
			t.Fatalf("refused requests changed a state: %.300s", body)
		}
		if code, msg := sv.triage(id, "0123456789abcdef0123", `{"state": "acknowledged", "link": "https://github.com/org/repo/issues/7"}`); code != 200 {
			t.Fatalf("acknowledge: %d %s", code, msg)
		}
		if code, msg := sv.triage(id, "0123456789abcdef0123", `{"state": "expected", "note": "<b>the new kernel</b>"}`); code != 200 {
			t.Fatalf("expected: %d %s", code, msg)
		}
		sv.stop()
		sv = start(t, dsn, serve.Options{TokenFile: tf}) // a restart: the store keeps it
		_, body, _ = sv.get("/api/changes?state=expected", "")
		doc = changesDoc{}
		json.Unmarshal([]byte(body), &doc)
		if len(doc.Changes) != 1 || doc.Changes[0].ID != id || len(doc.Changes[0].TriageEvents) != 2 {
			t.Fatalf("after a restart: %.500s", body)
		}
		ev := doc.Changes[0].TriageEvents
		if ev[0].Who != "ci-bot" || ev[0].From != "open" || ev[0].To != "acknowledged" || ev[0].Link != "https://github.com/org/repo/issues/7" ||
			ev[1].Who != "ci-bot" || ev[1].Via != "127.0.0.1" || ev[1].Note != "<b>the new kernel</b>" {
			t.Errorf("events: %+v", ev)
		}
		// the note is text on the page, never markup
		_, page, _ := sv.get("/series?key="+url.QueryEscape(doc.Changes[0].Key), "")
		if strings.Contains(page, "<b>the new kernel</b>") || !strings.Contains(page, "&lt;b&gt;the new kernel&lt;/b&gt;") {
			t.Errorf("the note is not escaped")
		}
		s, err := history.Open(t.Context(), dsn, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Check(t.Context(), history.CheckOptions{Options: changes.Defaults})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		bad := f.Regressions(history.Gate{Pct: 5, Window: 1})
		if len(bad) != 3 {
			t.Errorf("the gate fails on %d changes, want the 3 not marked expected", len(bad))
		}
		for _, b := range bad {
			if b.ID == id {
				t.Errorf("the expected change still fails the gate")
			}
		}
	}
}

// Safe by default: another address than loopback needs a token file; with one, every
// request but /healthz needs a token, unless --public-read opens the reads (triage still
// needs a token). SIGTERM (the context) drains and returns nil.
func TestSafeByDefault(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	s, _ := history.Open(t.Context(), dsn, false, 0)
	defer s.Close()
	if err := serve.Run(t.Context(), serve.Options{Store: s, Where: dsn, Listen: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "give --token-file") {
		t.Errorf("0.0.0.0 without tokens: %v", err)
	}
	// an address in use names the flag to change, and a port to try
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := serve.Run(t.Context(), serve.Options{Store: s, Where: dsn, Listen: busy.Addr().String()}); err == nil ||
		!strings.Contains(err.Error(), "the address is already in use") || !strings.Contains(err.Error(), "give --listen another port, e.g. --listen 127.0.0.1:") {
		t.Errorf("an address in use: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if err := serve.Run(t.Context(), serve.Options{Store: s, Where: dsn, TokenFile: short}); err == nil || !strings.Contains(err.Error(), "too easy to guess") {
		t.Errorf("a short token: %v", err)
	}
	// a token file others may read, or one that is not a file (a link to one others may
	// read is the file it names), is refused
	open := filepath.Join(t.TempDir(), "open")
	os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o644)
	linked := filepath.Join(t.TempDir(), "linked")
	os.Symlink("/etc/passwd", linked)
	// a token file must be the user's own file: a link is not followed, even to a private
	// file of theirs
	private := filepath.Join(t.TempDir(), "private")
	os.WriteFile(private, []byte("0123456789abcdef0123\n"), 0o600)
	linkedPrivate := filepath.Join(t.TempDir(), "linked-private")
	os.Symlink(private, linkedPrivate)
	cases := map[string]string{open: "chmod 600 it", linked: "is a symbolic link: opx does not follow one to the token file",
		linkedPrivate: "is a symbolic link", t.TempDir(): "not a regular file"}
	if os.Geteuid() == 0 { // another user's private file: its owner could write any token in
		theirs := filepath.Join(t.TempDir(), "theirs")
		os.WriteFile(theirs, []byte("0123456789abcdef0123\n"), 0o600)
		os.Chown(theirs, 65534, 65534)
		cases[theirs] = "the token file belongs to another user (owner uid 65534"
	}
	for path, want := range cases {
		if err := serve.Run(t.Context(), serve.Options{Store: s, Where: dsn, TokenFile: path}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token file %s: %v, want %q", path, err, want)
		}
	}
	tf := tokens(t)
	sv := start(t, dsn, serve.Options{Listen: "0.0.0.0:0", TokenFile: tf})
	for _, path := range []string{"/", "/api/changes", "/runs", "/api/runs", "/series?key=x", "/compare?base=a&new=b"} {
		if code, _, h := sv.get(path, ""); code != 401 || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without a token off loopback: %d", path, code)
		}
	}
	if code, _, _ := sv.get("/", "0123456789abcdef0123"); code != 200 {
		t.Errorf("/ with a token: %d", code)
	}
	if code, _, _ := sv.get("/healthz", ""); code != 200 {
		t.Errorf("/healthz needs no token: %d", code)
	}
	if err := sv.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	pub := start(t, dsn, serve.Options{Listen: "0.0.0.0:0", TokenFile: tf, PublicRead: true})
	if code, _, _ := pub.get("/api/changes", ""); code != 200 {
		t.Errorf("--public-read: %d", code)
	}
	if code, _ := pub.triage("c0000000000000f", "", `{"state": "expected"}`); code != 401 {
		t.Errorf("--public-read triage without a token: %d", code)
	}
	// a request in flight when the server is told to stop is answered, then it returns nil
	done := make(chan int)
	go func() {
		code, _, _ := pub.get("/api/runs", "")
		done <- code
	}()
	time.Sleep(20 * time.Millisecond)
	if err := pub.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if code := <-done; code != 200 {
		t.Errorf("the request in flight: %d", code)
	}
}

// Headless Chromium loads each page with no console error: the changes, a change's series
// with its plot drawn, the runs and a run; after a triage (by the API, with a token) the
// reloaded page shows the new state.
func TestPagesInChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{TokenFile: tokens(t)})
	dom, console := testenv.OpenInChromium(t, bin, sv.base+"/", filepath.Join(t.TempDir(), "changes.png"))
	if !strings.Contains(dom, `id="changes"`) || len(console) > 0 {
		t.Fatalf("/ in Chromium: console %q\n%.400s", console, dom)
	}
	i := strings.Index(dom, `href="/series?key=`)
	link := dom[i+len(`href="`):]
	link = strings.ReplaceAll(link[:strings.Index(link, `"`)], "&amp;", "&")
	dom, console = testenv.OpenInChromium(t, bin, sv.base+link, filepath.Join(t.TempDir(), "series.png"))
	if !strings.Contains(dom, "<svg") || !strings.Contains(dom, "<circle") || len(console) > 0 {
		t.Errorf("the series in Chromium: console %q\n%.400s", console, dom)
	}
	for _, p := range []string{"/runs", "/runs/nightly-8", "/compare?base=nightly-1&new=nightly-8"} {
		if dom, console := testenv.OpenInChromium(t, bin, sv.base+p, filepath.Join(t.TempDir(), "p.png")); len(console) > 0 || !strings.Contains(dom, "<table") {
			t.Errorf("%s in Chromium: console %q", p, console)
		}
	}
	var doc changesDoc
	_, body, _ := sv.get("/api/changes", "")
	json.Unmarshal([]byte(body), &doc)
	if code, msg := sv.triage(doc.Changes[0].ID, "0123456789abcdef0123", `{"state": "acknowledged"}`); code != 200 {
		t.Fatalf("triage: %d %s", code, msg)
	}
	dom, _ = testenv.OpenInChromium(t, bin, sv.base+"/", filepath.Join(t.TempDir(), "after.png"))
	if !strings.Contains(dom, `<span class="state acknowledged">acknowledged</span>`) {
		t.Errorf("the reloaded page does not show the triage")
	}
}

// The benchmark's small variant, as a test of correctness under load (its timing is
// scripts/bench-serve.sh's): 20 clients load the changes and a series page for a second
// while triage events are written; every answer is a 200, and the page sees the last state.
func TestConcurrentLoad(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{TokenFile: tokens(t)})
	var doc changesDoc
	_, body, _ := sv.get("/api/changes", "")
	json.Unmarshal([]byte(body), &doc)
	pages := []string{"/", "/series?key=" + url.QueryEscape(doc.Changes[0].Key), "/runs", "/api/changes"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	end := time.Now().Add(time.Second)
	for c := range 20 {
		wg.Go(func() {
			for i := c; time.Now().Before(end); i++ {
				resp, err := http.Get(sv.base + pages[i%len(pages)])
				code := 0
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	for _, state := range []string{"acknowledged", "invalid", "open", "expected"} {
		if code, msg := sv.triage(doc.Changes[0].ID, "0123456789abcdef0123", `{"state": "`+state+`"}`); code != 200 {
			t.Errorf("triage under load: %d %s", code, msg)
		}
	}
	wg.Wait()
	if len(codes) != 1 || codes[200] < 20 {
		t.Errorf("answers under load: %v", codes)
	}
	_, body, _ = sv.get("/api/changes?state=expected", "")
	if !strings.Contains(body, doc.Changes[0].ID) {
		t.Errorf("the last triage is not shown")
	}
}

// Stores of another shape than the generator's: an empty one (no run yet) and a young one
// (one run: no series can be judged) serve every page; a series of one point is drawn.
func TestEmptyAndYoungStores(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.db")
	s, err := history.Open(t.Context(), empty, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	sv := start(t, empty, serve.Options{})
	for _, p := range []string{"/", "/api/changes", "/runs", "/api/runs", "/healthz"} {
		if code, body, _ := sv.get(p, ""); code != 200 {
			t.Errorf("empty store %s: %d %.200s", p, code, body)
		}
	}
	if _, body, _ := sv.get("/", ""); !strings.Contains(body, `id="none"`) {
		t.Errorf("an empty store's changes page does not say there is none")
	}
	young := filepath.Join(t.TempDir(), "young.db")
	ys, err := history.Open(t.Context(), young, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = ys.Generate(t.Context(), history.Generated{Runs: 1, Cases: 3, Clusters: []string{"h100_dsxe_8x"}, Seed: 1})
	ys.Close()
	if err != nil {
		t.Fatal(err)
	}
	yv := start(t, young, serve.Options{})
	_, body, _ := yv.get("/api/runs", "")
	var runs struct{ Runs []history.RunSummary }
	if json.Unmarshal([]byte(body), &runs); len(runs.Runs) != 1 {
		t.Fatalf("young store runs: %s", body)
	}
	_, body, _ = yv.get("/runs/"+runs.Runs[0].RunID, "")
	i := strings.Index(body, `href="/series?key=`)
	if i < 0 {
		t.Fatalf("a run's page links no series: %.300s", body)
	}
	link := body[i+len(`href="`):]
	link = strings.ReplaceAll(link[:strings.Index(link, `"`)], "&amp;", "&")
	if code, page, _ := yv.get(link, ""); code != 200 || !strings.Contains(page, "<circle") {
		t.Errorf("a series of one point: %d %.300s", code, page)
	}
}

// snakeKeys lists every object key of a JSON document that is not snake_case, outside
// the maps whose keys are data (cluster, node and class names).
func snakeKeys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not JSON: %v %.200s", err, doc)
	}
	data := map[string]bool{"changes_per_cluster": true, "odd_nodes": true, "filter": true, "counts": true, "filter_values": true}
	var bad []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				ok := k != ""
				for _, r := range k {
					ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
				}
				if !ok {
					bad = append(bad, k)
				}
				if !data[k] {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return bad
}

// Pages say exactly what was judged: a young store says first that no series can be
// judged yet and lists them (page and /api/changes); a local run's time is CPU time; an
// id stored as several runs shows each with its cases and compare never guesses among
// them (409, naming each); every key under /api is snake_case.
func TestPagesSayWhatWasJudged(t *testing.T) {
	young := filepath.Join(t.TempDir(), "young.db")
	ys, err := history.Open(t.Context(), young, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = ys.Generate(t.Context(), history.Generated{Runs: 1, Cases: 3, Clusters: []string{"local@vm"}, Seed: 1})
	ys.Close()
	if err != nil {
		t.Fatal(err)
	}
	yv := start(t, young, serve.Options{})
	_, page, _ := yv.get("/", "")
	first, none := strings.Index(page, `id="young-first"`), strings.Index(page, "series judged")
	if first < 0 || none >= 0 || !strings.Contains(page, `id="young"`) || strings.Count(page, ": 1 of 5 runs") != 3 {
		t.Errorf("a young store's changes page does not say first that nothing was judged:\n%s", page)
	}
	var doc struct {
		Judged int                   `json:"judged"`
		Young  []history.YoungSeries `json:"young"`
	}
	_, body, _ := yv.get("/api/changes", "")
	if json.Unmarshal([]byte(body), &doc); doc.Judged != 0 || len(doc.Young) != 3 || doc.Young[0].Needs != 5 {
		t.Errorf("/api/changes of a young store: %s", body)
	}
	_, body, _ = yv.get("/api/runs", "")
	if !strings.Contains(body, `"unit": "CPU"`) || strings.Contains(body, `"unit": "GPU"`) {
		t.Errorf("a local run's time is not CPU time: %s", body)
	}
	if _, page, _ = yv.get("/runs", ""); !strings.Contains(page, "CPU</td>") || strings.Contains(page, "GPU") {
		t.Errorf("the runs page speaks of GPU time for a local run:\n%s", page)
	}

	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	generateInto(t, dsn, history.Generated{Runs: 1, Cases: 60, Clusters: []string{"h200_dgxc_8x", "mi355x_amds_8x"}, Seed: 9,
		From: time.Date(2026, 2, 1, 2, 0, 0, 0, time.UTC)})
	sv := start(t, dsn, serve.Options{})
	code, page, _ := sv.get("/runs/nightly-1", "")
	if code != 200 || strings.Count(page, `class="stored"`) != 2 || strings.Count(page, `href="/series?key=`) != 240 {
		t.Errorf("/runs of an id stored twice: %d, %d runs, %d cases shown", code, strings.Count(page, `class="stored"`), strings.Count(page, `href="/series?key=`))
	}
	var two struct {
		Runs []struct {
			Run   history.RunSummary  `json:"run"`
			Cases []history.CasePoint `json:"cases"`
		} `json:"runs_of_this_id"`
	}
	_, body, _ = sv.get("/api/runs/nightly-1", "")
	if json.Unmarshal([]byte(body), &two); len(two.Runs) != 2 || len(two.Runs[0].Cases) != 120 || len(two.Runs[1].Cases) != 120 || two.Runs[0].Run.ID == two.Runs[1].Run.ID {
		t.Errorf("/api/runs of an id stored twice: %.300s", body)
	}
	code, body, _ = sv.get("/api/compare?base=nightly-1&new=nightly-8", "")
	sids := []string{fmt.Sprint(two.Runs[0].Run.ID), fmt.Sprint(two.Runs[1].Run.ID)}
	if code != 409 || !strings.Contains(body, "base_sid="+sids[0]) || !strings.Contains(body, "base_sid="+sids[1]) {
		t.Errorf("compare with an id stored twice: %d %s", code, body)
	}
	if code, _, _ = sv.get("/api/compare?base=nightly-1&base_sid="+sids[1]+"&new=nightly-8", ""); code != 200 {
		t.Errorf("compare with the stored run chosen: %d", code)
	}
	// cases are named as people read them, the full key in the link's title; values carry
	// their unit; the series plot has value ticks in that unit and dated ticks
	_, page, _ = sv.get("/runs/nightly-8", "")
	if !strings.Contains(page, "gemm ") || !strings.Contains(page, "×") || !strings.Contains(page, " · vllm · ws=") || !strings.Contains(page, `title="`) ||
		strings.Contains(page, `>{&#34;`) || !strings.Contains(page, " µs</td>") || strings.Contains(page, "e+0") {
		t.Errorf("a run's cases are not named and valued as people read them:\n%.2000s", page)
	}
	if len(two.Runs) > 0 && len(two.Runs[0].Cases) > 0 {
		_, page, _ = sv.get("/series?key="+url.QueryEscape(two.Runs[0].Cases[0].Key), "")
		if !strings.Contains(page, " µs</text>") || !strings.Contains(page, `class="tick"`) || !strings.Contains(page, "<h1>gemm ") {
			t.Errorf("the series page has no readable name, value ticks or date ticks:\n%.2000s", page)
		}
	}
	paths := []string{"/api/changes", "/api/runs", "/api/runs/nightly-1", "/api/runs/nightly-8", "/api/compare?base=nightly-2&new=nightly-8"}
	if len(two.Runs) > 0 && len(two.Runs[0].Cases) > 0 {
		paths = append(paths, "/api/series?key="+url.QueryEscape(two.Runs[0].Cases[0].Key))
	}
	for _, p := range paths {
		_, body, _ := sv.get(p, "")
		if bad := snakeKeys(t, body); len(bad) > 0 {
			t.Errorf("%s: keys not snake_case: %v", p, bad)
		}
	}
}

// Loopback means this machine: a loopback server answers a request addressed to another
// name (a page that rebinds its own name to 127.0.0.1) with 421 and the security headers,
// and reads nothing to it; localhost, 127.0.0.1 and [::1] are answered.
func TestLoopbackRefusesRebinding(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(sv.base, "http://"))
	for host, want := range map[string]int{"evil.example:" + port: 421, "evil.example": 421, "127.0.0.1.nip.io:" + port: 421,
		"localhost:" + port: 200, "127.0.0.1:" + port: 200, "127.9.9.9:" + port: 200, "[::1]:" + port: 200, "LOCALHOST": 200} {
		for _, path := range []string{"/", "/api/changes", "/healthz"} {
			req, _ := http.NewRequest("GET", sv.base+path, nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("Host %s %s: %d, want %d", host, path, resp.StatusCode, want)
			}
			if want == 421 && (strings.Contains(string(body), "nightly") || !strings.Contains(string(body), "rebinds")) {
				t.Errorf("Host %s %s: the refusal reads the store or does not say why: %.200s", host, path, body)
			}
		}
	}
}

// The dashboard follows its store: when the SQLite file at --db is replaced (the workflow's
// new artifact moved into place), the next request reads the file there now, and /healthz
// names it (its inode) and the age of its newest run.
func TestServeFollowsAReplacedStore(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{TokenFile: tokens(t)})
	// triage written by the dashboard: frames in the WAL at the path, which are the old
	// file's and must never reach the file put in its place
	var doc changesDoc
	_, body0, _ := sv.get("/api/changes", "")
	json.Unmarshal([]byte(body0), &doc)
	for i := range 30 {
		state := []string{"acknowledged", "open"}[i%2]
		if code, msg := sv.triage(doc.Changes[0].ID, "0123456789abcdef0123", `{"state": "`+state+`"}`); code != 200 {
			t.Fatalf("triage: %d %s", code, msg)
		}
	}
	var runs struct{ Runs []history.RunSummary }
	_, body, _ := sv.get("/api/runs", "")
	json.Unmarshal([]byte(body), &runs)
	_, before, _ := sv.get("/healthz", "")
	if len(runs.Runs) != 8 {
		t.Fatalf("/api/runs: %s", body)
	}
	// a comparison kept from the old file (its run ids and store ids are the new one's too)
	if _, cmp, _ := sv.get("/api/compare?base=nightly-1&new=nightly-2", ""); !strings.Contains(cmp, "h200_dgxc_8x") {
		t.Fatalf("/api/compare: %.300s", cmp)
	}
	next := filepath.Join(dir, "next.db")
	generateInto(t, next, history.Generated{Runs: 3, Cases: 4, Clusters: []string{"h100_dsxe_8x"}, Seed: 4,
		From: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)})
	if err := os.Rename(next, dsn); err != nil {
		t.Fatal(err)
	}
	runs.Runs = nil
	_, body, _ = sv.get("/api/runs", "")
	json.Unmarshal([]byte(body), &runs)
	if len(runs.Runs) != 3 {
		t.Errorf("after the store was replaced, /api/runs lists %d runs, want the new file's 3", len(runs.Runs))
	}
	if _, cmp, _ := sv.get("/api/compare?base=nightly-1&new=nightly-2", ""); !strings.Contains(cmp, "h100_dsxe_8x") || strings.Contains(cmp, "h200_dgxc_8x") {
		t.Errorf("after the store was replaced, /api/compare answers the old file's comparison: %.300s", cmp)
	}
	code, after, _ := sv.get("/healthz", "")
	inode := regexp.MustCompile(`inode \d+`)
	if code != 200 || inode.FindString(after) == "" || inode.FindString(after) == inode.FindString(before) {
		t.Errorf("/healthz does not name the store now there:\nbefore %s\nafter %s", before, after)
	}
	if _, body, _ = sv.get("/", ""); !strings.Contains(body, "h100_dsxe_8x") && !strings.Contains(body, "judged") {
		t.Errorf("the changes page of the new store: %.300s", body)
	}
	// the file put in place is whole, and holds nothing of the old one's WAL
	sv.stop()
	raw, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var check string
	var triaged, nruns int
	raw.QueryRow("PRAGMA integrity_check").Scan(&check)
	raw.QueryRow("SELECT COUNT(*) FROM triage").Scan(&triaged)
	raw.QueryRow("SELECT COUNT(*) FROM runs").Scan(&nruns)
	if check != "ok" || triaged != 0 || nruns != 3 {
		t.Errorf("the replacing file after serve: integrity %q, %d triage events, %d runs (want ok, 0, 3)", check, triaged, nruns)
	}
}

// The dashboard offers triage exactly where the API accepts it: a change the series page
// shows on a series the newest run did not touch (another machine's) is triaged, not 404;
// an id of no change is still refused.
func TestTriageWhereverShown(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{TokenFile: tokens(t)})
	var doc changesDoc
	_, body, _ := sv.get("/api/changes", "")
	json.Unmarshal([]byte(body), &doc)
	if len(doc.Changes) == 0 {
		t.Fatal("no change to triage")
	}
	ch := doc.Changes[0]
	// another machine's run is the newest: the changes page no longer lists ch
	generateInto(t, dsn, history.Generated{Runs: 1, Cases: 3, Clusters: []string{"h100_dsxe_8x"}, Seed: 5,
		From: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)})
	_, body, _ = sv.get("/api/changes", "")
	if strings.Contains(body, ch.ID) {
		t.Fatalf("the newest run's check still lists %s", ch.ID)
	}
	_, page, _ := sv.get("/series?key="+url.QueryEscape(ch.Key), "")
	if !strings.Contains(page, `data-change="`+ch.ID+`"`) {
		t.Fatalf("the series page offers no triage of %s", ch.ID)
	}
	if code, msg := sv.triage(ch.ID, "0123456789abcdef0123", `{"state": "acknowledged"}`); code != 200 {
		t.Errorf("triage of a change the series page shows: %d %s", code, msg)
	}
	if code, _ := sv.triage("c000000000000000", "0123456789abcdef0123", `{"state": "acknowledged"}`); code != 404 {
		t.Errorf("triage of no change: %d", code)
	}
}

// A replaced file that cannot be opened (a copy still in progress: an empty file) is said
// so by /healthz, never served as if it were the store; once a store is there, the next
// request serves it.
func TestServeWaitsForAReplacementItCanOpen(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "h.db")
	generated(t, dsn)
	sv := start(t, dsn, serve.Options{})
	if code, _, _ := sv.get("/api/runs", ""); code != 200 {
		t.Fatalf("/api/runs: %d", code)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if err := os.Rename(empty, dsn); err != nil {
		t.Fatal(err)
	}
	code, body, _ := sv.get("/healthz", "")
	if code != 503 || !strings.Contains(body, "replaced, and what is there now cannot be opened") || !strings.Contains(body, "an empty file") {
		t.Errorf("/healthz over an empty replacement: %d %s", code, body)
	}
	next := filepath.Join(dir, "next.db")
	generateInto(t, next, history.Generated{Runs: 2, Cases: 3, Clusters: []string{"h100_dsxe_8x"}, Seed: 6,
		From: time.Date(2026, 4, 1, 2, 0, 0, 0, time.UTC)})
	os.Rename(next, dsn)
	var runs struct{ Runs []history.RunSummary }
	code, body, _ = sv.get("/api/runs", "")
	json.Unmarshal([]byte(body), &runs)
	if code != 200 || len(runs.Runs) != 2 {
		t.Errorf("once a store is there: %d, %d runs", code, len(runs.Runs))
	}
	if code, body, _ := sv.get("/healthz", ""); code != 200 {
		t.Errorf("/healthz once a store is there: %d %s", code, body)
	}
}

// compareWindows holds /api/compare's windows of the total cases at path: ?limit= cases
// from ?offset=, where they lie (cases_total, cases_from), the next window linked until
// the last; the windows read in turn are every case of limit=all, in its order; a limit
// or offset out of bounds is refused, naming it.
func compareWindows(t *testing.T, sv *server, path string, total int) {
	t.Helper()
	type doc struct {
		Total *int              `json:"cases_total"`
		From  int               `json:"cases_from"`
		Cases []json.RawMessage `json:"cases"`
	}
	var all doc
	code, body, _ := sv.get(path+"&limit=all", "")
	if err := json.Unmarshal([]byte(body), &all); code != 200 || err != nil || len(all.Cases) != total || all.Total != nil {
		t.Fatalf("limit=all: %d %v, %d cases (want %d), cases_total %v", code, err, len(all.Cases), total, all.Total)
	}
	var read []json.RawMessage
	next := path + "&limit=50"
	for pages := 0; next != ""; pages++ {
		code, body, h := sv.get(next, "")
		var d doc
		if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil || d.Total == nil || *d.Total != total || d.From != len(read) || len(d.Cases) != min(50, total-len(read)) {
			t.Fatalf("%s: %d %v: %.300s", next, code, err, body)
		}
		read = append(read, d.Cases...)
		next = ""
		if l := h.Get("Link"); l != "" {
			u, _, _ := strings.Cut(strings.TrimPrefix(l, "<"), ">")
			next = u
			if !strings.HasSuffix(l, `>; rel="next"`) || !strings.Contains(u, fmt.Sprintf("offset=%d", len(read))) {
				t.Errorf("%s: Link %q", path, l)
			}
		}
		if pages > total {
			t.Fatal("the windows never end")
		}
	}
	if len(read) != total {
		t.Errorf("the windows hold %d cases, limit=all %d", len(read), total)
	}
	for i := range min(len(read), len(all.Cases)) {
		if string(read[i]) != string(all.Cases[i]) {
			t.Errorf("case %d of the windows differs from limit=all's:\n%s\n%s", i, read[i], all.Cases[i])
			break
		}
	}
	var d doc
	if _, body, _ := sv.get(path, ""); json.Unmarshal([]byte(body), &d) != nil || len(d.Cases) != min(total, serve.CompareWindow) {
		t.Errorf("the default window: %d cases", len(d.Cases))
	}
	for _, bad := range []string{"&limit=0", "&limit=10001", "&limit=ten", "&offset=-1"} {
		if code, body, _ := sv.get(path+bad, ""); code != 400 || !strings.Contains(body, strings.SplitN(bad[1:], "=", 2)[0]+"=") {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if code, body, _ := sv.get(path+"&offset=100000", ""); code != 200 || !strings.Contains(body, `"cases_from":120,"cases":[`+"\n]}") {
		t.Errorf("a window past the end: %d %.300s", code, body)
	}
}
