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
