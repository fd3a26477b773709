// Package serve is `opx serve`: the team's dashboard over a history store — changes with
// triage, series, runs, two runs compared — as HTML pages and the same data as JSON.
//
// It reads the store live (each request sees what was added), writes nothing to it but
// triage events, and is safe by default: reads are open on loopback only; any other
// address needs tokens (--token-file), and triage always does. Every page is rendered on
// the server and reads without JavaScript; one embedded script and stylesheet enhance it,
// under a Content-Security-Policy that allows no inline script.
package serve

import (
	"bufio"
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/safe"
)

// Options are opx serve's flags.
type Options struct {
	Store      *history.Store
	Where      string // the store, as messages name it
	Listen     string // host:port; 127.0.0.1:8080 by default
	TokenFile  string
	PublicRead bool
	Log        io.Writer
	// Ready, when set, is told the address the server listens on (port 0 picks one).
	Ready func(addr string)
}

// MaxBody is the most a request body may hold (a triage event: a state, a note, a link).
const MaxBody = 16 << 10

// token is one accepted bearer token and whose it is.
type token struct{ name, secret string }

// ReadTokens reads a token file: one token a line, "name:token" to name it; blank lines
// and # comments are ignored. A token shorter than 16 characters is refused (guessable),
// and so is a file that is not the user's own and private (files.OpenGranting: a link,
// another user's file, one others may read or write).
func ReadTokens(path string) ([]token, error) {
	f, fi, err := files.OpenGranting(path, "the token file", true) // the user's own, private, no link followed
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := files.ReadOpenedInto(context.Background(), f, fi, 1<<20, nil)
	if err != nil {
		return nil, err
	}
	var out []token
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t := token{name: fmt.Sprintf("token %d", n), secret: line}
		if name, secret, ok := strings.Cut(line, ":"); ok && !strings.Contains(secret, ":") && name != "" {
			t = token{name: strings.TrimSpace(name), secret: strings.TrimSpace(secret)}
		}
		if len(t.secret) < 16 {
			return nil, fmt.Errorf("%s:%d: a token of %d characters is too easy to guess: use 16 or more (openssl rand -hex 24)", path, n, len(t.secret))
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in it (one a line, name:token to name it)", path)
	}
	return out, nil
}

// Loopback is whether addr (host:port) listens on this machine alone.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckListen is the one rule for where the dashboard listens and who reads it: a
// host:port; off loopback, a token file (only the team reads the store); --public-read
// only with one (triage always needs a token). opx serve checks it before it opens the
// store (a usage error), Run again.
func CheckListen(listen, tokenFile string, publicRead bool) error {
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return fmt.Errorf("--listen %s: give host:port, such as 127.0.0.1:8080", listen)
	}
	if !Loopback(listen) && tokenFile == "" {
		return fmt.Errorf("--listen %s is not a loopback address: give --token-file, so that only the team reads the store (and --public-read to open reads)", listen)
	}
	if publicRead && tokenFile == "" {
		return errors.New("--public-read opens reads off loopback: it needs --token-file (triage always needs a token)")
	}
	return nil
}

// Run serves until ctx ends, then drains the requests in flight (up to 20 s) and returns nil.
func Run(ctx context.Context, o Options) error {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
	}
	if err := CheckListen(o.Listen, o.TokenFile, o.PublicRead); err != nil {
		return err
	}
	var tokens []token
	if o.TokenFile != "" {
		var err error
		if tokens, err = ReadTokens(o.TokenFile); err != nil {
			return err
		}
	}
	open := Loopback(o.Listen) || o.PublicRead
	ln, err := net.Listen("tcp", o.Listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--listen %s: the address is already in use (another opx serve, or another server): give --listen another port, e.g. --listen %s", o.Listen, nextPort(o.Listen))
	}
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	o.Store.Readers(2 * runtime.GOMAXPROCS(0))
	d := newDash(o.Store, o.Where)
	d.warm()
	h := d.handler(tokens, open)
	if Loopback(o.Listen) {
		h = loopbackOnly(o.Listen, h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	if o.Log != nil {
		reads := "open (loopback)"
		switch {
		case !Loopback(o.Listen) && o.PublicRead:
			reads = "open to all (--public-read)"
		case !open:
			reads = "token required"
		}
		fmt.Fprintf(o.Log, "opx serve: http://%s/ over %s; reads %s, triage needs a token (%d accepted)\n", ln.Addr(), safe.Text(o.Where), reads, len(tokens))
	}
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	proc.SetStopWords(ctx, "opx serve: stopping now: the requests in flight are cut short")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "opx serve: %s: no new request is taken; the requests in flight finish (at most 20 s; a second signal ends them at once)\n", safe.OneLine(context.Cause(ctx).Error()))
	}
	// the drain ends early at a second signal (proc.Cleanup: the context it cancels)
	clean, stop := proc.Cleanup(ctx)
	defer stop()
	drain, cancel := context.WithTimeout(clean, 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(drain); err != nil {
		srv.Close()
		if cause := context.Cause(clean); cause != nil && clean.Err() != nil {
			return cause // the second signal: exit 128+n
		}
		return fmt.Errorf("draining the requests in flight: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackOnly refuses (421) a request to a loopback server whose Host is not this
// machine's — localhost, an address in 127.0.0.0/8 or ::1, or the --listen host: a web
// page that rebinds its own name to 127.0.0.1 (DNS rebinding) reads nothing as its own
// origin.
func loopbackOnly(listen string, next http.Handler) http.Handler {
	own, _, _ := net.SplitHostPort(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
		ip := net.ParseIP(host)
		if strings.EqualFold(host, "localhost") || strings.EqualFold(host, own) || (ip != nil && ip.IsLoopback()) {
			next.ServeHTTP(w, r)
			return
		}
		headers(w)
		http.Error(w, "this opx serve listens on loopback and answers only requests addressed to this machine (Host localhost, 127.0.0.1 or [::1]); a page that rebinds another name to it reads nothing (docs/serve.md)", http.StatusMisdirectedRequest)
	})
}

// headers are every response's security headers.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// who is the token's name a request carries, and whether it carries a valid one
// (compared in constant time against each).
func who(r *http.Request, tokens []token) (string, bool) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return "", false
	}
	name, found := "", 0
	for _, t := range tokens {
		if subtle.ConstantTimeCompare([]byte(got), []byte(t.secret)) == 1 {
			name, found = t.name, 1
		}
	}
	return name, found == 1
}

// handler is the routes, each behind the headers and, for reads when they are not open,
// a token.
func (d *dash) handler(tokens []token, openReads bool) http.Handler {
	mux := http.NewServeMux()
	read := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !openReads {
				if _, ok := who(r, tokens); !ok {
					unauthorized(w)
					return
				}
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.HandleFunc("GET /static/opx.css", static("text/css; charset=utf-8", css))
	mux.HandleFunc("GET /static/opx.js", static("text/javascript; charset=utf-8", js))
	mux.HandleFunc("GET /{$}", read(d.changesPage))
	mux.HandleFunc("GET /api/changes", read(d.changesAPI))
	mux.HandleFunc("GET /series", read(d.seriesPage))
	mux.HandleFunc("GET /api/series", read(d.seriesAPI))
	mux.HandleFunc("GET /runs", read(d.runsPage))
	mux.HandleFunc("GET /api/runs", read(d.runsAPI))
	mux.HandleFunc("GET /runs/{id}", read(d.runPage))
	mux.HandleFunc("GET /api/runs/{id}", read(d.runAPI))
	mux.HandleFunc("GET /compare", read(d.comparePage))
	mux.HandleFunc("GET /api/compare", read(d.compareAPI))
	mux.HandleFunc("POST /api/changes/{id}/triage", func(w http.ResponseWriter, r *http.Request) {
		name, ok := who(r, tokens)
		if !ok {
			unauthorized(w)
			return
		}
		d.triage(w, r, name)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w)
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		mux.ServeHTTP(w, r)
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="opx"`)
	http.Error(w, "a valid bearer token is required (Authorization: Bearer TOKEN; opx serve --token-file)", http.StatusUnauthorized)
}

func static(kind, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", kind)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		io.WriteString(w, body)
	}
}

//go:embed opx.css
var css string

//go:embed opx.js
var js string

// nextPort is addr with the port after its own (8080: 8081), for a message.
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if p, perr := strconv.Atoi(port); err == nil && perr == nil && p > 0 && p < 65535 {
		return net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	return "127.0.0.1:8081"
}
