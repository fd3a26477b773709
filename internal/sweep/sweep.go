// Package sweep is `opx run`: one sweep end to end (plan, execute, summarize, report) with its
// progress, resume and Ctrl-C handling.
//
// It is opx run: one sweep end to end — plan, execute every shard (a few at a
// time), summarize and report, in process — with its progress on the terminal or in the
// log, and everything it writes under one run directory.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/report"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/version"
)

// Options are opx run's: the plan's selection, where the sweep goes, and how shards run.
type Options struct {
	Plan                                  plan.Request
	Dir                                   string // "" for .opx-run/<UTC time>-<pid>
	MaxParallel, TimeMinutes, CleanupSecs int
	Getenv                                func(string) string
	Environ                               []string
	Stdout, Stderr                        io.Writer
	Terminal                              bool // stderr is a terminal: a status line instead of log lines
	// Resume is a run directory of an earlier opx run: run only the cases it is missing,
	// as its next attempt (Plan's selection is not used).
	Resume string
	// Manifest is a manifest to run as it is, instead of planning one (a confirmation
	// manifest of opx history check, a manifest planned elsewhere): its cells are checked,
	// then it is copied into the run directory.
	Manifest string
	// AB, when set, measures every shard as a paired A/B (shard.AB) and writes the run's
	// ab.json (ab.go).
	AB *shard.AB
}

// Incomplete is Run's error when the sweep ran but its verdict is not success
// (internal/verdict; the last lines said why): summarize's exit status 1, and nothing
// more to say.
type Incomplete struct{}

func (Incomplete) Error() string { return "the run did not succeed" }

// ExitCode is summarize's.
func (Incomplete) ExitCode() int { return 1 }

// sweep is one Run: its directory, plan and progress.
type sweep struct {
	o                  Options
	dir, shards, mpath string
	p                  plan.Request
	pr                 *progress
	// execManifest is the manifest the shards execute: mpath, or a resume attempt's
	exec string
	// setupFailed counts the shards that failed before anything ran (a host problem:
	// opx doctor says what, and a resume cannot help before it is fixed)
	setupFailed atomic.Int32
}

// Run is opx run.
func Run(ctx context.Context, o Options) error {
	if o.Resume != "" {
		return runResume(ctx, o)
	}
	dir := o.Dir
	if dir == "" {
		// the pid keeps two runs started in the same second apart
		dir = filepath.Join(".opx-run", time.Now().UTC().Format("20060102T150405Z")+"-"+strconv.Itoa(os.Getpid()))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var given *manifest.Manifest
	if o.Manifest != "" { // every part of a given manifest checked before the run directory is made
		if given, err = checkManifest(ctx, o.Manifest); err != nil {
			return err
		}
	}
	release, err := claimRunDir(dir)
	if err != nil {
		return err
	}
	planned := false
	defer func() { release(planned) }()
	s := newSweep(ctx, o, dir)
	defer s.pr.finish()
	s.p.Out = s.mpath
	if s.p.SourceSHA == "unknown" { // not given: the commit of the checkout opx runs in, if any
		if sha := gitHead(ctx, "."); sha != "" {
			s.p.SourceSHA = sha
		}
	}
	if o.Manifest != "" {
		if err := s.adopt(ctx, o.Manifest, given); err != nil {
			return err
		}
		planned = true
		s.markLatest(o.Dir == "")
		return s.executeAndFinish(ctx)
	}
	s.pr.logf("planning %s on %s (backends %s, world sizes %s)", s.p.Testlists, s.p.Runner, s.p.Backends, s.p.WorldSizes)
	if err := plan.Run(ctx, &s.p, io.Discard, o.Stderr, false); err != nil {
		return err
	}
	planned = true
	s.markLatest(o.Dir == "")
	return s.executeAndFinish(ctx)
}

// Latest is the link in .opx-run to the newest run made there (the default --out).
const Latest = "latest"

// markLatest points .opx-run/latest at this run, when it is one of .opx-run's: a
// relative link, made beside it and renamed over the old one (atomic: a reader sees the
// old run or the new, never no link). Something there that is not a link is the user's
// and is left alone, with a word.
func (s *sweep) markLatest(inDefault bool) {
	if !inDefault {
		return
	}
	parent := filepath.Dir(s.dir)
	link := filepath.Join(parent, Latest)
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		s.pr.logf("%s is not a link opx made: left as it is (not pointed at this run)", link)
		return
	}
	tmp := filepath.Join(parent, fmt.Sprintf(".%s-%d", Latest, os.Getpid()))
	os.Remove(tmp)
	err := os.Symlink(filepath.Base(s.dir), tmp)
	if err == nil {
		err = os.Rename(tmp, link)
	}
	if err != nil {
		os.Remove(tmp)
		s.pr.logf("%s: not pointed at this run: %v", link, err)
	}
}

// adopt takes a given manifest as the run's: every cell checked (before any node is
// allocated), its run id, attempt and source SHA the run's, and a copy of it in the run
// directory, where every later step and a resume read it.
func (s *sweep) adopt(ctx context.Context, path string, m *manifest.Manifest) error {
	b, err := files.ReadRegular(ctx, path, 1<<30)
	if err != nil {
		return err
	}
	if err := files.WriteAtomic(s.mpath, b, 0o644); err != nil {
		return err
	}
	s.p.RunID, s.p.SourceSHA = m.RunID, m.SourceSHA
	if a, ok := m.Raw.String("attempt"); ok {
		s.p.Attempt = a
	}
	s.pr.logf("running %s: %d shard(s) as given", path, len(m.Cells))
	return nil
}

// checkManifest reads a given manifest and checks everything of it that becomes a path,
// an argument or a variable — its run id and attempt, every cell (manifest.Cell.Check)
// and cell id — so that a bad one is refused before the run directory is made, not when
// its shard starts.
func checkManifest(ctx context.Context, path string) (*manifest.Manifest, error) {
	m, err := manifest.Load(ctx, path)
	if err != nil {
		return nil, err
	}
	ids := []struct{ what, v string }{{"run id", m.RunID}}
	if a, ok := m.Raw.String("attempt"); ok {
		ids = append(ids, struct{ what, v string }{"attempt", a})
	}
	for _, id := range ids {
		if !files.SafeName(id.v) {
			return nil, fmt.Errorf("%s: its %s %s: use 1-128 letters, digits, '.', '_' and '-'", path, id.what, pytext.Repr(id.v))
		}
	}
	for _, c := range m.Cells {
		if !files.SafeName(c.ID) {
			return nil, fmt.Errorf("%s: a cell id %s: use 1-128 letters, digits, '.', '_' and '-'", path, pytext.Repr(c.ID))
		}
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("%s: cell %s %w", path, c.ID, err)
		}
	}
	return m, nil
}

func newSweep(ctx context.Context, o Options, dir string) *sweep {
	s := &sweep{o: o, dir: dir, shards: filepath.Join(dir, "shards"), mpath: filepath.Join(dir, "operatorx-manifest.json"),
		p: o.Plan, pr: newProgress(ctx, o.Stderr, o.Terminal, 0, 0)}
	s.exec = s.mpath
	return s
}

// executeAndFinish runs the shards of s.exec, then summarizes and reports the run.
func (s *sweep) executeAndFinish(ctx context.Context) error {
	if err := writeRunRecord(s.dir, s.pr.start, s.p, s.o.AB, nil, false); err != nil {
		return err
	}
	m, err := manifest.LoadOutline(ctx, s.exec)
	if err != nil {
		return err
	}
	reg, _, err := platform.LoadConfig(s.p.PlatformConfig)
	if err != nil {
		return err
	}
	if s.o.AB != nil {
		if err := s.abFamily(ctx); err != nil {
			return err
		}
	}
	s.execute(ctx, m, reg)
	interrupted := context.Cause(ctx)
	if interrupted != nil {
		// what finished is still summarized and reported, with a context of its own
		ctx = context.WithoutCancel(ctx)
	}
	return s.finish(ctx, interrupted)
}

// execute runs the manifest's shards, MaxParallel at a time (one at a time on the local
// runner, whose ranks already use this machine's devices). After a signal no new shard
// starts, and the running ones clean up.
func (s *sweep) execute(ctx context.Context, m *manifest.Manifest, reg *platform.Registry) {
	parallel := s.o.MaxParallel
	if s.p.Runner == platform.Local {
		parallel = 1
	}
	cases := 0
	for _, c := range m.Cells {
		cases += len(c.Cases)
	}
	pr := s.pr
	pr.planned(len(m.Cells), cases)
	pr.logf("%d shard(s) of %d case(s), %d at a time; output in %s", len(m.Cells), cases, parallel, s.dir)
	// on the first Ctrl-C, say what happens next: the running shards clean up (their
	// allocations cancelled and confirmed gone, their rows collected), then the summary and
	// report of what finished are written
	// (on the local runner: its rank processes stopped; there is no allocation)
	cleanup := "allocations cancelled and confirmed gone, rows collected"
	if len(m.Cells) > 0 && !slices.ContainsFunc(m.Cells, func(c *manifest.Cell) bool { return c.Runner != platform.Local }) {
		cleanup = "rank processes stopped, rows collected"
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			pr.logf("%s: no new shard starts; cleaning up %d running shard(s) (%s), then writing the summary and report of what finished", safe.OneLine(context.Cause(ctx).Error()), pr.runningShards(), cleanup)
		case <-stopped:
		}
	}()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cell := range m.Cells {
		// not even a shard whose turn came while the running ones were cleaning up
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.shard(ctx, reg, cell, i+1)
		})
	}
	wg.Wait()
}

// shard executes one shard and reports its end.
func (s *sweep) shard(ctx context.Context, reg *platform.Registry, cell *manifest.Cell, index int) {
	out := filepath.Join(s.shards, cell.ID)
	if s.p.Attempt != "1" { // attempt 1 keeps the layout opx run always had
		out += ".attempt-" + s.p.Attempt
	}
	t0 := time.Now()
	s.pr.shardStarted(cell.ID, index, len(cell.Cases), out)
	err := shard.Execute(ctx, shard.Options{
		Shard: cell.ID, RunID: s.p.RunID, Attempt: s.p.Attempt, SourceSHA: s.p.SourceSHA, RunnerName: "opx-run",
		TimeMinutes: s.o.TimeMinutes, CleanupSeconds: s.o.CleanupSecs, Manifest: s.exec, Output: out,
		Registry: reg, Getenv: s.o.Getenv, Environ: s.o.Environ,
		Stderr: s.pr.writer(), // execute's own messages, kept apart from the status line
		Stdout: &phaseWriter{fn: func(ph string) { s.pr.shardPhase(cell.ID, ph) }},
		Slurm:  &shard.Slurm{UID: os.Getuid(), Env: s.o.Environ, Warn: s.pr.writer()},
		BinaryFor: func(imagePlatform string) (string, error) {
			return shard.StagedBinary(imagePlatform, "", "")
		},
		AB: s.o.AB,
	})
	state := "done"
	if err != nil {
		state = "failed: " + safe.OneLine(err.Error())
		if _, serr := os.Stat(out); serr != nil { // it failed before its output existed: a setup failure
			state += " (nothing ran; check this host: " + s.doctorCommand() + ")"
			s.setupFailed.Add(1)
			if werr := recordSetupFailure(ctx, out, s.exec, cell.ID, s.p, err); werr != nil {
				s.pr.logf("%s: its setup failure could not be recorded: %v", cell.ID, werr)
			}
		}
	}
	s.pr.shardDone(cell.ID, summary.RowsIn(ctx, filepath.Join(out, "results")), state, time.Since(t0))
}

// unallocated counts the newest attempts that failed before any allocation was granted —
// staging, or asking Slurm for one (a controller that does not answer) — a problem of this
// host, which opx doctor checks, not of the cases.
func unallocated(l *results.Ledger) int {
	n := 0
	for _, a := range l.Attempts {
		if a.Counted && a.Outcome == "failed" && a.GrantedAt == nil &&
			(strings.HasPrefix(a.Failure, "allocation: ") || strings.HasPrefix(a.Failure, "stage: ")) {
			n++
		}
	}
	return n
}

// doctorCommand is the opx doctor line that checks this host for the run's runner.
func (s *sweep) doctorCommand() string {
	c := "opx doctor --runner " + safe.ShellWord(s.p.Runner)
	if s.p.PlatformConfig != "" {
		c += " --platform-config " + safe.ShellWord(s.p.PlatformConfig)
	}
	return c
}

// recordSetupFailure writes what a shard that failed before anything ran leaves behind,
// so that the ledger and the report say why like any failed attempt, not only the
// terminal: its execution.json (the cell, no stage: none was made) and a status.json of
// exit 1 whose failure is the setup's.
func recordSetupFailure(ctx context.Context, out, manifestPath, id string, p plan.Request, cause error) (err error) {
	m, err := manifest.Load(ctx, manifestPath) // the cell whole, as execute writes it
	if err != nil {
		return err
	}
	cell, ok := m.Cell(id)
	if !ok {
		return fmt.Errorf("shard %s is not in %s", id, manifestPath)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(out, 0o700); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(out) // half a record is none: the shard stays missing
		}
	}()
	ex := &manifest.Execution{Cell: cell, SourceSHA: p.SourceSHA, RunID: p.RunID, Attempt: p.Attempt}
	if err := ex.Write(filepath.Join(out, "execution.json")); err != nil {
		return err
	}
	return manifest.WriteStatus(filepath.Join(out, manifest.StatusFile), 1, []string{},
		&manifest.Failure{Phase: "setup", Message: safe.Cap(safe.OneLine(cause.Error()), safe.MaxMessage)})
}

// finish writes the summary, the case ledger, the report and run.json, and prints the
// coverage table.
func (s *sweep) finish(ctx context.Context, interrupted error) error {
	pr := s.pr
	pr.setPhase("summarize")
	// a shard that failed before its output existed (a setup failure) left nothing here:
	// the summary, ledger and report still say every case is missing, and why it failed
	// was said as it failed
	if err := os.MkdirAll(s.shards, 0o755); err != nil {
		return err
	}
	casesPath := filepath.Join(s.dir, "cases.json")
	ledger, err := results.CreateLedger(casesPath, s.shards)
	if err != nil {
		return err
	}
	defer ledger.Close()
	run, err := results.CoverInto(ctx, s.mpath, s.shards, ledger)
	if err != nil {
		return err
	}
	rep := run.Summary
	sumPath := filepath.Join(s.dir, "summary.json")
	if err := files.WriteJSON(sumPath, rep.Value()); err != nil {
		return err
	}
	if err := ledger.Commit(run.Ledger); err != nil {
		return err
	}
	pr.setPhase("report")
	reportPath := filepath.Join(s.dir, "report.html")
	if _, err := report.WriteFile(ctx, reportPath, s.mpath, s.shards); err != nil {
		return err
	}
	pr.finish()
	rep.Markdown(s.o.Stdout)
	pr.logf("finished in %.1f s", time.Since(pr.start).Seconds())
	pr.logf("%s", run.Ledger.Line())
	pr.logf("manifest: %s", s.mpath)
	pr.logf("shard outputs: %s", s.shards)
	pr.logf("summary: %s", sumPath)
	pr.logf("case ledger: %s", casesPath)
	pr.logf("report: %s", reportPath)
	if t := run.Ledger.Totals(); interrupted != nil || t.Error+t.Missing > 0 {
		// the exact command that pays only for what is still missing
		if n := int(s.setupFailed.Load()) + unallocated(run.Ledger); n > 0 {
			pr.logf("%d shard(s) could not start on this host: check it first, %s; then, to run only the %d case(s) still missing or in error: opx run --resume %s",
				n, s.doctorCommand(), t.Error+t.Missing, safe.ShellWord(s.dir))
		} else {
			pr.logf("to run only the %d case(s) still missing or in error: opx run --resume %s", t.Error+t.Missing, safe.ShellWord(s.dir))
		}
	}
	if err := writeRunRecord(s.dir, pr.start, s.p, s.o.AB, interrupted, true); err != nil {
		return err
	}
	var abErr error
	if s.o.AB != nil {
		abErr = s.finishAB(ctx)
	}
	if interrupted != nil {
		return interrupted
	}
	if !rep.Success {
		return Incomplete{}
	}
	return abErr
}

// runLock is the file that marks a run directory as taken by one opx run.
const runLock = ".opx-run.lock"

// claimRunDir makes dir the output of this run alone: it must be new or empty (a user's
// files there are never overwritten; a lock no opx run holds does not count), and its run
// lock (lockRun) keeps a second opx run out while this one lives. release lets the lock
// go, and removes the directory when this run created it and planned nothing into it (a
// failed plan leaves no trace).
func claimRunDir(dir string) (release func(planned bool), err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	created := true
	if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
		created = false
		fi, err := os.Lstat(dir)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("--out %s is not a directory", dir)
		}
		if err := files.CheckOwnDir(dir); err != nil {
			return nil, fmt.Errorf("--out %w", err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var others []fs.DirEntry
		for _, e := range ents {
			if e.Name() == runLock {
				unlock, err := lockRun(dir)
				if err != nil {
					return nil, err
				}
				unlock()
				continue
			}
			others = append(others, e)
		}
		ents = others
		if len(ents) > 0 {
			hint := ""
			if _, err := os.Stat(filepath.Join(dir, "operatorx-manifest.json")); err == nil {
				hint = " (to run only what that run is missing: opx run --resume " + dir + ")"
			}
			return nil, fmt.Errorf("%s is not empty (it holds %s); opx run writes only into a new or empty --out%s", dir, ents[0].Name(), hint)
		}
	} else if err != nil {
		return nil, err
	}
	unlock, err := lockRun(dir)
	if err != nil {
		return nil, err
	}
	return func(planned bool) {
		unlock()
		if created && !planned {
			os.RemoveAll(dir)
		}
	}, nil
}

// lockRun takes dir's run lock: the file .opx-run.lock (made when missing; never a link,
// FIFO or device, and opened without blocking), held by flock(2) for as long as this
// process holds it — the kernel lets it go when the process ends, however it ends, so no
// lock is ever stale: of two opx runs racing for one directory exactly one gets it, and
// the other names the process that has it. unlock removes the file, then lets the lock
// go, so a finished run leaves none behind; a taker that locked the file just as it was
// removed sees that the path no longer names what it locked, and takes the new one.
func lockRun(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, runLock)
	for range 100 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("the run lock %s: %w", path, err)
		}
		fi, err := f.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("the run lock %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			defer f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("another opx run (%s) is writing to %s: it holds %s; wait for it to end", holderOf(f), dir, path)
			}
			return nil, fmt.Errorf("the run lock %s: %w", path, err)
		}
		if now, err := os.Lstat(path); err != nil || !os.SameFile(fi, now) {
			f.Close() // its holder removed it as it let go: lock the file the path names now
			continue
		}
		line := fmt.Sprintf("pid %d\n", os.Getpid())
		f.WriteAt([]byte(line), 0) // then cut what a longer earlier line left: never empty
		f.Truncate(int64(len(line)))
		return func() {
			if now, err := os.Lstat(path); err == nil && os.SameFile(fi, now) {
				os.Remove(path)
			}
			f.Close()
		}, nil
	}
	return nil, fmt.Errorf("the run lock %s: it was removed and made again 100 times while opx took it: another program is at it", path)
}

// holderOf names the process holding a run lock: "pid N" from its first line, once that
// process is alive — the holder writes its pid just after it takes the lock, so a line
// that is empty or names a dead process is read again for a moment before it is given up
// as "a process".
func holderOf(f *os.File) string {
	buf := make([]byte, 64)
	for range 40 {
		n, _ := f.ReadAt(buf, 0)
		first, _, _ := strings.Cut(string(buf[:n]), "\n")
		if pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(first), "pid ")); err == nil && pid > 0 {
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				return strings.TrimSpace(first)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "a process"
}

func writeRunRecord(dir string, start time.Time, p plan.Request, a *shard.AB, interrupted error, finished bool) error {
	rec := results.RunRecord{StartedAt: start.UTC().Format(time.RFC3339), RunID: p.RunID, Attempt: p.Attempt, SourceSHA: p.SourceSHA,
		PlatformConfig: p.PlatformConfig, OpxVersion: version.String()}
	if a != nil {
		rec.AB = &results.ABSides{Base: a.Base.Label, Head: a.Head.Label}
	}
	if p.PlatformConfig != "" {
		if abs, err := filepath.Abs(p.PlatformConfig); err == nil {
			rec.PlatformConfig = abs
		}
	}
	if finished {
		t := time.Now().UTC().Format(time.RFC3339)
		rec.FinishedAt = &t
	}
	if interrupted != nil {
		why := safe.OneLine(interrupted.Error())
		rec.Interrupted = &why
	}
	return files.WriteIndented(filepath.Join(dir, "run.json"), rec)
}

// gitHead is the commit of the git checkout dir is in ("" when it is not one).
func gitHead(ctx context.Context, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := proc.Output(ctx, proc.Cmd{Argv: []string{"git", "-C", dir, "rev-parse", "--verify", "HEAD"}, Stderr: io.Discard})
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
