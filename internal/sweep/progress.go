package sweep

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/summary"
)

// progress is opx run's account of a sweep. On a terminal it redraws one status line —
// phase, shards done of N (and running), cases done of M, elapsed — a few times a second;
// otherwise (CI logs) it writes plain lines: each shard's start, phases and end, and while
// a shard runs a line each tenth of its cases, and at least once a minute (PlainEvery):
// a long shard is never silent in a log for more than a minute.
type progress struct {
	ctx         context.Context // the run's: ends the reads a redraw makes
	mu          sync.Mutex
	w           io.Writer
	tty         bool
	start       time.Time
	shards      int
	cases       int
	done        int
	doneCases   int
	phase       string
	running     map[string]*shardProgress
	stop        chan struct{}
	stopped     chan struct{}
	lineWritten bool
	// period is how often the plain lines look at the running shards' rows (5 s), and
	// quiet the most a running shard goes without a line (a minute)
	period, quiet time.Duration
}

type shardProgress struct {
	index, cases int
	out          string // the shard's output directory (execution.json names the stage)
	stage        string
	// the plain lines': the rows at the last line, and when it was written
	said   int
	saidAt time.Time
	began  time.Time
}

// plainEvery and plainQuiet are progress's every and quiet (tests shorten them).
var plainEvery, plainQuiet = 5 * time.Second, time.Minute

func newProgress(ctx context.Context, w io.Writer, tty bool, shards, cases int) *progress {
	p := &progress{ctx: ctx, w: w, tty: tty, start: time.Now(), shards: shards, cases: cases, phase: "plan",
		running: map[string]*shardProgress{}, stop: make(chan struct{}), stopped: make(chan struct{}),
		period: plainEvery, quiet: plainQuiet}
	if tty {
		go p.tick(250*time.Millisecond, func() []string { p.draw(); return nil })
	} else {
		go p.tick(p.period, p.plainLines)
	}
	return p
}

// tick calls fn under p.mu each period until the progress stops, and writes the lines it
// returns once p.mu is let go.
func (p *progress) tick(period time.Duration, fn func() []string) {
	defer close(p.stopped)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			lines := fn()
			p.mu.Unlock()
			for _, l := range lines {
				p.logf("%s", l)
			}
		}
	}
}

// plainLines are, off a terminal, a line for each running shard that measured a tenth of
// its cases since its last line, or was quiet for p.quiet; p.mu is held.
func (p *progress) plainLines() []string {
	var lines []string
	now := time.Now()
	for id, s := range p.running {
		rows := p.measured(s)
		step := max(1, (s.cases+9)/10)
		if rows >= s.said+step || now.Sub(s.saidAt) >= p.quiet {
			s.said, s.saidAt = rows, now
			lines = append(lines, fmt.Sprintf("shard %d/%d %s: case %d/%d measured, %s in", s.index, p.shards, id, rows, s.cases, elapsed(now.Sub(s.began))))
		}
	}
	slices.Sort(lines)
	return lines
}

// measured is how many of a running shard's cases its rank 0 has checkpointed into its
// stage; p.mu is held.
func (p *progress) measured(s *shardProgress) int {
	if s.stage == "" {
		s.stage = p.stageOf(s.out)
	}
	if s.stage == "" {
		return 0
	}
	return min(s.cases, summary.RowsIn(p.ctx, filepath.Join(s.stage, "results")))
}

// draw writes the status line; p.mu is held.
func (p *progress) draw() {
	if p.shards == 0 {
		return // still planning
	}
	casesNow := p.doneCases
	for _, s := range p.running {
		casesNow += p.measured(s)
	}
	line := fmt.Sprintf("opx run: [%s] shard %d/%d", p.phase, min(p.done+len(p.running), p.shards), p.shards)
	if len(p.running) > 1 {
		line += fmt.Sprintf(" (%d running)", len(p.running))
	}
	line += fmt.Sprintf(" · case %d/%d · %s", casesNow, p.cases, elapsed(time.Since(p.start)))
	fmt.Fprintf(p.w, "\r\x1b[2K%s", line)
	p.lineWritten = true
}

// stageOf reads the stage path execute recorded in out/execution.json ("" until it is there).
func (p *progress) stageOf(out string) string {
	ex, err := manifest.ReadExecution(p.ctx, filepath.Join(out, "execution.json"))
	if err != nil {
		return ""
	}
	return ex.Stage
}

func elapsed(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// logf writes a plain line; on a terminal it clears the status line first.
func (p *progress) logf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.lineWritten {
		fmt.Fprint(p.w, "\r\x1b[2K")
	}
	fmt.Fprintln(p.w, "opx run: "+safe.Text(fmt.Sprintf(format, a...)))
	if p.tty {
		p.draw()
	}
}

// lineWriter is a writer for other output on the same stream (execute's messages): each
// complete line is written like logf's, with the status line cleared first and redrawn
// after, so the two never mix on a terminal.
type lineWriter struct {
	p   *progress
	buf []byte
}

func (p *progress) writer() *lineWriter { return &lineWriter{p: p} }

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.p.mu.Lock()
		if w.p.tty && w.p.lineWritten {
			fmt.Fprint(w.p.w, "\r\x1b[2K")
		}
		fmt.Fprintln(w.p.w, safe.Text(line))
		if w.p.tty {
			w.p.draw()
		}
		w.p.mu.Unlock()
	}
}

// planned records the sweep's size once the plan is written.
func (p *progress) planned(shards, cases int) {
	p.mu.Lock()
	p.shards, p.cases, p.phase = shards, cases, "execute"
	p.mu.Unlock()
}

// runningShards is how many shards are running now.
func (p *progress) runningShards() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.running)
}

func (p *progress) setPhase(phase string) {
	p.mu.Lock()
	p.phase = phase
	p.mu.Unlock()
}

func (p *progress) shardStarted(id string, index, cases int, out string) {
	p.mu.Lock()
	now := time.Now()
	p.running[id] = &shardProgress{index: index, cases: cases, out: out, saidAt: now, began: now}
	p.phase = "execute"
	p.mu.Unlock()
	p.logf("shard %d/%d %s: started (%d cases)", index, p.shards, id, cases)
}

// shardPhase is called with each "[operatorx] phase=X" line a shard prints.
func (p *progress) shardPhase(id, phase string) {
	p.mu.Lock()
	p.phase = phase
	s := p.running[id]
	p.mu.Unlock()
	if !p.tty && s != nil {
		p.logf("shard %d/%d %s: %s", s.index, p.shards, id, phase)
	}
}

func (p *progress) shardDone(id string, rows int, state string, took time.Duration) {
	p.mu.Lock()
	s := p.running[id]
	delete(p.running, id)
	p.done++
	if s != nil {
		p.doneCases += min(rows, s.cases)
	}
	done := p.done
	p.mu.Unlock()
	idx := 0
	if s != nil {
		idx = s.index
	}
	p.logf("shard %d/%d %s: %s in %.1f s (%d/%d finished)", idx, p.shards, id, state, took.Seconds(), done, p.shards)
}

// finish stops the status line and leaves the terminal on a fresh line.
func (p *progress) finish() {
	p.mu.Lock()
	stopping := p.stop != nil
	p.mu.Unlock()
	if stopping {
		close(p.stop)
		<-p.stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.lineWritten {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.lineWritten = false
	}
	p.tty = false // what follows is plain lines
	p.stop = nil
}

// phaseWriter turns a shard's stdout into phase events (execute prints
// "[operatorx] phase=X" at each step) and drops the rest: opx run's stdout is the table.
type phaseWriter struct {
	buf []byte
	fn  func(string)
}

func (w *phaseWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if ph, ok := strings.CutPrefix(line, "[operatorx] phase="); ok {
			w.fn(strings.TrimSpace(ph))
		}
	}
	if len(w.buf) > 4096 {
		w.buf = w.buf[len(w.buf)-4096:]
	}
	return len(b), nil
}
