package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// answers is a server that answers each POST with the next of its statuses (the last
// again once they run out), and records what it was sent.
type answers struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header // set on every answer
	bodies   []string
	types    []string
	times    []time.Time
}

func (a *answers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost && r.Method != http.MethodPatch {
		http.Error(w, "POST or PATCH only", http.StatusMethodNotAllowed)
		return
	}
	a.bodies, a.types, a.times = append(a.bodies, string(b)), append(a.types, r.Header.Get("Content-Type")), append(a.times, time.Now())
	st := a.statuses[min(len(a.bodies), len(a.statuses))-1]
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(st)
	switch st {
	case 200:
		io.WriteString(w, "ok")
	case 404:
		io.WriteString(w, "no_service") // Slack's answer to a webhook that was removed
	default:
		io.WriteString(w, "try later\nsecond line")
	}
}

func TestPostRetriesWhatMayBeRetried(t *testing.T) {
	quick := Poster{Wait: time.Millisecond}
	for _, tc := range []struct {
		name     string
		statuses []int
		posts    int
		status   int // 0: posted
		why      string
	}{
		{"ok at once", []int{200}, 1, 0, ""},
		{"a 500 then ok", []int{500, 200}, 2, 0, ""},
		{"rate limited then ok", []int{429, 200}, 2, 0, ""},
		{"5xx every time", []int{503}, 3, 503, "503 Service Unavailable: try later second line"},
		{"a removed webhook: never again", []int{404}, 1, 404, "404 Not Found: no_service"},
		{"forbidden: never again", []int{403}, 1, 403, "403 Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{statuses: tc.statuses}
			srv := httptest.NewServer(a)
			defer srv.Close()
			secret := srv.URL + "/services/T000/B000/XXXXSECRET"
			got, err := quick.Post(t.Context(), secret, []byte(`{"text":"hi"}`), nil)
			if len(a.bodies) != tc.posts {
				t.Errorf("%d posts, want %d", len(a.bodies), tc.posts)
			}
			for i := range a.bodies {
				if a.bodies[i] != `{"text":"hi"}` || a.types[i] != "application/json" {
					t.Errorf("post %d: %q as %q", i, a.bodies[i], a.types[i])
				}
			}
			if tc.status == 0 {
				if err != nil || string(got) != "ok" {
					t.Errorf("%q, %v", got, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || !strings.Contains(e.Error(), tc.why) || e.Tries != tc.posts {
				t.Fatalf("error %v, want status %d, %d tries, saying %q", err, tc.status, tc.posts, tc.why)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error shows the webhook's secret: %v", err)
			}
		})
	}
}

// A 429's Retry-After is waited for, within MaxWait; one beyond it is not waited for.
func TestRetryAfter(t *testing.T) {
	a := &answers{statuses: []int{429, 200}, header: http.Header{"Retry-After": {"1"}}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	if _, err := (Poster{Wait: time.Millisecond}).Post(t.Context(), srv.URL, []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if len(a.times) != 2 || a.times[1].Sub(a.times[0]) < 900*time.Millisecond {
		t.Errorf("posted again %v after a Retry-After of 1 s", a.times[len(a.times)-1].Sub(a.times[0]))
	}
	b := &answers{statuses: []int{429}, header: http.Header{"Retry-After": {"3600"}}}
	srv2 := httptest.NewServer(b)
	defer srv2.Close()
	_, err := (Poster{Wait: time.Millisecond, MaxWait: 10 * time.Millisecond}).Post(t.Context(), srv2.URL, []byte(`{}`), nil)
	if err == nil || len(b.bodies) != 1 || !strings.Contains(err.Error(), "asked to wait 1h0m0s") {
		t.Errorf("a Retry-After of an hour: %d posts, %v", len(b.bodies), err)
	}
}

// No answer (nothing listens) is retried, then said without the URL's path; a canceled
// context ends the waiting at once.
func TestNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/hooks/SECRET"
	srv.Close()
	_, err := (Poster{Wait: time.Millisecond}).Post(t.Context(), url, []byte(`{}`), nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 0 || e.Tries != 3 || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("nothing listening: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Poster{Wait: time.Hour}).Post(ctx, url, []byte(`{}`), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestCheck(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.slack.com/services/T/B/X": true,
		"http://127.0.0.1:8080/hook":             true,
		"http://hooks.slack.com/services/T/B/X":  false, // a secret in clear text
		"ftp://example.com/x":                    false,
		"hooks.slack.com/services":               false,
		"":                                       false,
	} {
		if _, err := Check(raw); (err == nil) != ok {
			t.Errorf("%q: %v", raw, err)
		}
		if _, err := Check(raw); err != nil && strings.Contains(err.Error(), "/services") {
			t.Errorf("%q: the error shows the path: %v", raw, err)
		}
	}
}

// GitHub's spent rate limit (403, X-RateLimit-Remaining 0) waits for its reset, then tries
// again; a 403 that is no rate limit does not.
func TestSpentRateLimitWaitsForItsReset(t *testing.T) {
	a := &answers{statuses: []int{403, 200}, header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(time.Now().Add(time.Second).Unix())}}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	if _, err := (Poster{Wait: time.Millisecond}).Send(t.Context(), http.MethodPatch, srv.URL, []byte(`{}`), nil); err != nil || len(a.bodies) != 2 {
		t.Fatalf("%d tries: %v", len(a.bodies), err)
	}
	if d := a.times[1].Sub(a.times[0]); d < 500*time.Millisecond {
		t.Errorf("tried again %v after a spent rate limit, before its reset", d)
	}
}
