package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPhaseWriterSplitsLines(t *testing.T) {
	var got []string
	w := &phaseWriter{fn: func(p string) { got = append(got, p) }}
	for _, chunk := range []string{"[operatorx] phase=allo", "cation\nnoise\n[operatorx] phase=bench", "mark\n[operatorx] phase=cleanup"} {
		w.Write([]byte(chunk))
	}
	if strings.Join(got, ",") != "allocation,benchmark" {
		t.Fatalf("phases %q (an unterminated line waits for its newline)", got)
	}
}

// On a terminal the status line counts the rows a running shard's rank 0 has
// checkpointed into its stage; off a terminal only plain lines are written.
func TestProgressStatusLine(t *testing.T) {
	dir := t.TempDir()
	stage := filepath.Join(dir, "stage")
	out := filepath.Join(dir, "out")
	os.MkdirAll(filepath.Join(stage, "results", "cpu", "local"), 0o755)
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "s1", "runner": "local"}, "source_sha": "a", "run_id": "1", "attempt": "1", "stage": "`+stage+`"}`), 0o644)
	os.WriteFile(filepath.Join(stage, "results", "cpu", "local", "r.json"), []byte(`{"rows": [{"status": "ok"}, {"status": "unsupported"}]}`), 0o644)

	var tty bytes.Buffer
	p := newProgress(t.Context(), &tty, true, 0, 0)
	p.mu.Lock()
	p.shards, p.cases = 3, 9
	p.mu.Unlock()
	p.shardStarted("s1", 1, 4, out)
	p.shardPhase("s1", "benchmark")
	p.mu.Lock()
	p.draw()
	p.mu.Unlock()
	p.shardDone("s1", 4, "done", time.Second)
	p.finish()
	s := tty.String()
	for _, want := range []string{"\r\x1b[2Kopx run: [benchmark] shard 1/3 · case 2/9 · 0:00", "shard 1/3 s1: started (4 cases)\n",
		"shard 1/3 s1: done in 1.0 s (1/3 finished)\n", "[benchmark] shard 1/3 · case 4/9"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
	if !strings.HasSuffix(s, "\r\x1b[2K") {
		t.Errorf("finish must clear the status line: %q", s[max(0, len(s)-40):])
	}

	var plain bytes.Buffer
	p = newProgress(t.Context(), &plain, false, 3, 9)
	p.shardStarted("s1", 1, 4, out)
	p.shardPhase("s1", "allocation")
	p.shardDone("s1", 4, "done", time.Second)
	p.finish()
	if want := "opx run: shard 1/3 s1: started (4 cases)\nopx run: shard 1/3 s1: allocation\nopx run: shard 1/3 s1: done in 1.0 s (1/3 finished)\n"; plain.String() != want {
		t.Errorf("plain output %q, want %q", plain.String(), want)
	}
}

// Issue 20: other output on the same terminal (execute's "allocation released" line) clears
// the status line first and redraws it after: the two never run together.
func TestOtherOutputClearsTheStatusLine(t *testing.T) {
	var tty bytes.Buffer
	p := newProgress(t.Context(), &tty, true, 2, 4)
	p.mu.Lock()
	p.draw()
	p.mu.Unlock()
	w := p.writer()
	w.Write([]byte("opx: allocation 7 rel"))
	w.Write([]byte("eased\nopx: second\n"))
	p.finish()
	s := tty.String()
	want := "· 0:00\r\x1b[2Kopx: allocation 7 released\n\r\x1b[2Kopx run: [plan] shard 0/2 · case 0/4 · 0:00\r\x1b[2Kopx: second\n"
	if !strings.Contains(s, want) {
		t.Errorf("terminal output %q\nlacks %q", s, want)
	}
	if strings.Contains(s, "0:00opx") {
		t.Errorf("a line ran into the status line: %q", s)
	}
}

// Off a terminal a running shard is never silent for long: a line each tenth of its cases
// it measures, and one at least every quiet period even when none was (issue 48: a CI log
// had no line inside a long shard).
func TestPlainProgressInsideAShard(t *testing.T) {
	defer func(e, q time.Duration) { plainEvery, plainQuiet = e, q }(plainEvery, plainQuiet)
	plainEvery, plainQuiet = 20*time.Millisecond, 300*time.Millisecond
	dir := t.TempDir()
	stage, out := filepath.Join(dir, "stage"), filepath.Join(dir, "out")
	res := filepath.Join(stage, "results", "cpu", "local")
	os.MkdirAll(res, 0o755)
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "s1", "runner": "local"}, "source_sha": "a", "run_id": "1", "attempt": "1", "stage": "`+stage+`"}`), 0o644)
	var buf syncBuffer
	p := newProgress(t.Context(), &buf, false, 1, 20)
	p.shardStarted("s1", 1, 20, out)
	rows := func(n int) {
		r := strings.Repeat(`{"status": "ok"},`, n)
		os.WriteFile(filepath.Join(res, "r.json.tmp"), []byte(`{"rows": [`+strings.TrimSuffix(r, ",")+`]}`), 0o644)
		os.Rename(filepath.Join(res, "r.json.tmp"), filepath.Join(res, "r.json"))
	}
	waitFor := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if strings.Contains(buf.String(), want) {
				return
			}
		}
		t.Fatalf("no %q in:\n%s", want, buf.String())
	}
	rows(1) // under a tenth (2 cases): no line yet
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(buf.String(), "measured") {
		t.Errorf("a line before a tenth of the cases: %q", buf.String())
	}
	rows(3)
	waitFor("opx run: shard 1/1 s1: case 3/20 measured, 0:00 in\n")
	waitFor("opx run: shard 1/1 s1: case 3/20 measured, 0:00 in\nopx run: shard 1/1 s1: case 3/20 measured") // quiet: said again
	p.shardDone("s1", 20, "done", time.Second)
	p.finish()
	n := strings.Count(buf.String(), "measured")
	time.Sleep(100 * time.Millisecond)
	if strings.Count(buf.String(), "measured") != n {
		t.Error("lines after the shard ended")
	}
}

// syncBuffer is a bytes.Buffer the progress goroutine and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
