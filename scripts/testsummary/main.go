// Command testsummary reads `go test -json` on stdin and prints what a person running the
// suite wants to see: each package as it finishes with its counts, every failing test's
// output, and at the end the passed, failed and skipped tests, with each skip's reason.
// When nothing was printed for 30 s it says what is still running and the counts so far,
// so a long package is never a silent stretch. It exits 1 when a test or a package failed.
//
//	go test -json ./... | go run ./scripts/testsummary [-v]
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type event struct {
	Action, Package, Test, Output string
	Elapsed                       float64
}

type counts struct{ pass, fail, skip int }

func main() {
	verbose = len(os.Args) > 1 && os.Args[1] == "-v"
	os.Exit(run(os.Stdin, os.Stdout, 30*time.Second))
}

// verbose (-v) prints each passing test's output too (a measurement's figures).
var verbose bool

// heartbeat prints what is still running when nothing was printed for every.
type heartbeat struct {
	mu      sync.Mutex
	w       io.Writer
	last    time.Time
	running map[string]time.Time // package/test -> when it started
	total   *counts
}

func (h *heartbeat) printf(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(h.w, format, a...)
	h.last = time.Now()
}

// track keeps what is running: a test or package from its start to its end.
func (h *heartbeat) track(e event, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ended := e.Action == "pass" || e.Action == "fail" || e.Action == "skip"
	switch {
	case e.Action == "run" && !strings.Contains(e.Test, "/"):
		h.running[key] = time.Now()
	case e.Action == "start" && e.Test == "":
		h.running[e.Package] = time.Now()
	case ended && e.Test != "":
		delete(h.running, key)
	case ended:
		delete(h.running, e.Package)
	}
}

func (h *heartbeat) beat(every time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.last) < every {
		return
	}
	var names []string
	oldest := time.Now()
	for k, at := range h.running {
		names = append(names, strings.TrimPrefix(k, "github.com/semianalysis/opx/"))
		if at.Before(oldest) {
			oldest = at
		}
	}
	sort.Strings(names)
	more := ""
	if len(names) > 4 {
		more = fmt.Sprintf(" and %d more", len(names)-4)
		names = names[:4]
	}
	fmt.Fprintf(h.w, "…    still running (%.0fs): %s%s; %d passed, %d failed, %d skipped so far\n",
		time.Since(oldest).Seconds(), strings.Join(names, ", "), more, h.total.pass, h.total.fail, h.total.skip)
	h.last = time.Now()
}

// run is the command: it reads the events from r, writes to w, and returns the exit code.
func run(r io.Reader, w io.Writer, every time.Duration) int {
	sum := &summary{out: map[string][]string{}, per: map[string]*counts{}}
	sum.h = &heartbeat{w: w, last: time.Now(), running: map[string]time.Time{}, total: &sum.total}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(every / 10)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				sum.h.beat(every)
			}
		}
	}()
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			sum.h.printf("%s\n", in.Text()) // not an event: a build error, say
			continue
		}
		sum.event(e)
	}
	return sum.end()
}

// summary is what run has read so far.
type summary struct {
	h             *heartbeat
	out           map[string][]string // package/test -> its output, while it runs
	per           map[string]*counts
	total         counts // read by the heartbeat: changed under h.mu
	skips, failed []string
	pkgFailed     bool
}

// event takes one event of go test -json.
func (s *summary) event(e event) {
	key := e.Package + " " + e.Test
	s.h.track(e, key)
	c := s.per[e.Package]
	if c == nil {
		c = &counts{}
		s.per[e.Package] = c
	}
	switch e.Action {
	case "build-output": // a package that does not compile: its compiler's words
		s.h.printf("%s", e.Output)
	case "output":
		s.out[key] = append(s.out[key], e.Output)
	case "pass", "fail", "skip":
		switch {
		case e.Test == "": // the package is done
			status := map[string]string{"pass": "ok  ", "fail": "FAIL", "skip": "--  "}[e.Action]
			if e.Action == "fail" {
				s.pkgFailed = true
				if c.fail == 0 { // failed outside any test: its output says why
					s.h.printf("%s", strings.Join(s.out[key], ""))
				}
			}
			s.h.printf("%s %-55s %6.1fs  %d passed, %d failed, %d skipped\n", status, e.Package, e.Elapsed, c.pass, c.fail, c.skip)
		case strings.Contains(e.Test, "/"): // subtests count with their test
			if e.Action == "fail" {
				s.h.printf("%s", strings.Join(s.out[key], ""))
			}
		default:
			s.ended(e, key, c)
		}
	}
}

// ended counts a test that ended, and prints what a reader needs of it: a failing test's
// output (a passing one's too with -v).
func (s *summary) ended(e event, key string, c *counts) {
	if e.Action == "fail" || verbose && e.Action == "pass" {
		s.h.printf("%s", strings.Join(s.out[key], ""))
	}
	s.h.mu.Lock()
	switch e.Action {
	case "pass":
		c.pass++
		s.total.pass++
	case "fail":
		c.fail++
		s.total.fail++
		s.failed = append(s.failed, e.Package+" "+e.Test)
	case "skip":
		c.skip++
		s.total.skip++
		s.skips = append(s.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason(s.out[key])))
	}
	s.h.mu.Unlock()
	delete(s.out, key)
}

// end prints the counts, every skip's reason and every failed test, and is the exit code.
func (s *summary) end() int {
	sort.Strings(s.skips)
	s.h.printf("\ntests: %d passed, %d failed, %d skipped\n", s.total.pass, s.total.fail, s.total.skip)
	for _, sk := range s.skips {
		s.h.printf("  skipped: %s\n", sk)
	}
	for _, f := range s.failed {
		s.h.printf("  FAILED: %s\n", f)
	}
	if s.total.fail > 0 || s.pkgFailed {
		return 1
	}
	return 0
}

// reason is a skipped test's t.Skip message: its output's lines but the run/skip markers.
func reason(lines []string) string {
	var r []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") {
			t = t[i+2:]
		}
		r = append(r, t)
	}
	return strings.Join(r, " ")
}
