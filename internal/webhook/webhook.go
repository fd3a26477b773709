// Package webhook sends JSON to an HTTP endpoint — an incoming webhook (Slack's, or any
// that takes JSON), or a REST API (GitHub's) — retrying what the server says may be
// retried: no answer, 5xx, 429 or a 403 of a spent rate limit (after its Retry-After, or
// until its X-RateLimit-Reset). Any other answer but 2xx fails at once, with the status and
// the first line of what the server said. A webhook's URL is its secret: no message here
// names more of it than its host.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/version"
)

// Poster posts; the zero value tries 3 times, a second apart and then two, with
// http.DefaultClient's transport and a 30 s limit on each try.
type Poster struct {
	Client *http.Client
	Tries  int           // tries in all (3 when 0)
	Wait   time.Duration // before the second try, doubled for each after it (1 s when 0)
	// MaxWait caps a wait, the server's Retry-After included (60 s when 0)
	MaxWait time.Duration
}

// Check is whether raw can be posted to: an https URL, or http to this machine (a test, a
// relay on the runner). What is wrong is said without the URL's secret parts.
func Check(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, errors.New("the webhook is not a URL (give https://host/path)")
	}
	if u.User != nil {
		return nil, fmt.Errorf("the webhook at %s carries a user name or password in its URL: give its https URL alone", safe.Text(u.Hostname()))
	}
	local := u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" || u.Hostname() == "::1"
	if u.Scheme != "https" && !(u.Scheme == "http" && local) {
		return nil, fmt.Errorf("the webhook at %s is %s: give an https URL (http only to this machine)", safe.Text(u.Host), safe.Text(u.Scheme))
	}
	return u, nil
}

// withoutURL is why a request got no answer, without the URL (url.Error prints the URL as
// it rebuilt it, or a redirect's: the webhook's secret either way).
func withoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timed out"
		}
		return ue.Op + ": " + safe.OneLine(ue.Err.Error())
	}
	return safe.OneLine(err.Error())
}

// Error is a post that failed: the status of the last answer (0: none came) and why.
type Error struct {
	Host   string
	Status int
	Tries  int
	Why    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("posting to %s failed after %d %s: %s", safe.Text(e.Host), e.Tries, plural(e.Tries, "try", "tries"), e.Why)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Post posts body (JSON) to raw with the headers given, and returns the answer's body.
func (p Poster) Post(ctx context.Context, raw string, body []byte, header http.Header) ([]byte, error) {
	a, err := p.Send(ctx, http.MethodPost, raw, body, header)
	if err != nil {
		return nil, err
	}
	return a.Body, nil
}

// Answer is a server's 2xx answer.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Send sends a request of the method to raw (body: JSON, or nil for none) with the headers
// given, and returns the server's 2xx answer.
func (p Poster) Send(ctx context.Context, method, raw string, body []byte, header http.Header) (*Answer, error) {
	u, err := Check(raw)
	if err != nil {
		return nil, err
	}
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	tries, wait, maxWait := p.Tries, p.Wait, p.MaxWait
	if tries <= 0 {
		tries = 3
	}
	if wait <= 0 {
		wait = time.Second
	}
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	fail := &Error{Host: u.Host}
	for try := 1; ; try++ {
		fail.Tries = try
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, raw, rd)
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("User-Agent", "opx/"+version.String())
		resp, err := client.Do(req)
		after := time.Duration(0)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			fail.Status, fail.Why = 0, "no answer: "+withoutURL(err)
		} else {
			got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return &Answer{resp.StatusCode, resp.Header, got}, nil
			}
			fail.Status, fail.Why = resp.StatusCode, fmt.Sprintf("%s: %s", resp.Status, safe.Cap(safe.OneLine(string(got)), 200))
			// a spent rate limit (GitHub: 403 or 429, X-RateLimit-Remaining 0) waits for its reset
			spent := resp.Header.Get("X-RateLimit-Remaining") == "0"
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode/100 != 5 && !(resp.StatusCode == http.StatusForbidden && (spent || resp.Header.Get("Retry-After") != "")) {
				return nil, fail // the server will say the same again
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				after = time.Duration(s) * time.Second
			} else if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil && spent {
				after = max(time.Second, time.Until(time.Unix(reset, 0)))
			}
		}
		if try >= tries {
			return nil, fail
		}
		d := max(wait<<(try-1), after)
		if d > maxWait {
			if after > maxWait {
				fail.Why += fmt.Sprintf(" (the server asked to wait %s, more than %s)", after, maxWait)
				return nil, fail
			}
			d = maxWait
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
