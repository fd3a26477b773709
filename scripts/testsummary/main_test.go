package main

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// A package that runs long is never a silent stretch: with nothing printed for the period,
// the summary says what is still running and the counts so far; then each package's line
// and the totals as before (issue 48: the compare package was 147 s of silence).
func TestHeartbeatWhileAPackageRuns(t *testing.T) {
	r, w := io.Pipe()
	var out strings.Builder
	var mu sync.Mutex
	done := make(chan int)
	go func() {
		done <- run(r, writerFunc(func(b []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return out.Write(b)
		}), 100*time.Millisecond)
	}()
	io.WriteString(w, `{"Action":"start","Package":"github.com/semianalysis/opx/internal/compare"}
{"Action":"run","Package":"github.com/semianalysis/opx/internal/compare","Test":"TestSlow"}
{"Action":"run","Package":"github.com/semianalysis/opx/internal/compare","Test":"TestQuick"}
{"Action":"pass","Package":"github.com/semianalysis/opx/internal/compare","Test":"TestQuick"}
`)
	time.Sleep(350 * time.Millisecond)
	io.WriteString(w, `{"Action":"pass","Package":"github.com/semianalysis/opx/internal/compare","Test":"TestSlow"}
{"Action":"pass","Package":"github.com/semianalysis/opx/internal/compare","Elapsed":0.4}
`)
	w.Close()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	mu.Lock()
	s := out.String()
	mu.Unlock()
	beats := strings.Count(s, "still running")
	if beats < 2 || !strings.Contains(s, "internal/compare TestSlow") || strings.Contains(s, "TestQuick;") ||
		!strings.Contains(s, "1 passed, 0 failed, 0 skipped so far") {
		t.Errorf("%d heartbeats in:\n%s", beats, s)
	}
	if !strings.Contains(s, "ok   github.com/semianalysis/opx/internal/compare") || !strings.HasSuffix(s, "tests: 2 passed, 0 failed, 0 skipped\n") {
		t.Errorf("summary:\n%s", s)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// A failing test's output is printed, the exit code is 1, and the end names it; a
// skipped test's reason is listed.
func TestFailuresAndSkips(t *testing.T) {
	var out strings.Builder
	in := strings.NewReader(`{"Action":"run","Package":"p","Test":"TestBad"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"    bad_test.go:9: want 2, got 3\n"}
{"Action":"fail","Package":"p","Test":"TestBad"}
{"Action":"run","Package":"p","Test":"TestSkip"}
{"Action":"output","Package":"p","Test":"TestSkip","Output":"    x_test.go:3: no GPU here\n"}
{"Action":"skip","Package":"p","Test":"TestSkip"}
{"Action":"fail","Package":"p","Elapsed":0.1}
`)
	done := make(chan int)
	go func() { done <- run(in, &out, time.Minute) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failing test hung the summary")
	}
	s := out.String()
	for _, want := range []string{"bad_test.go:9: want 2, got 3", "FAIL p", "0 passed, 1 failed, 1 skipped", "  skipped: p TestSkip: no GPU here", "  FAILED: p TestBad"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}
