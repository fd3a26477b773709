package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/version"
)

type runOptions struct {
	plan                                  planOptions
	dir                                   string
	maxParallel, timeMinutes, cleanupSecs int
}

const runLong = `Plan a sweep, execute every shard, and summarize it — in one command. With no flags it
runs opx's own cpu backend on this machine (runner local, testlist cpu_smoke, world size
1), so a newcomer gets a real sweep from 'go run ./cmd/opx run'. The same command drives
a Slurm cluster from a login node: pass a cluster runner (or a custom one from
--platform-config) and --max-parallel to run that many shards at once.

Everything lands under --out (default .opx-run/<UTC time>-<pid>), which must be new or
empty: a user's files are never overwritten, and a second opx run into the same
directory is refused while the first lives: the manifest, one output
directory per shard under shards/ (execute's layout: logs, status.json, results/),
summary.json and report.html (opx report's page). On a terminal a status line shows the
phase, shard k/N, case i/M and the time elapsed; otherwise plain log lines. The coverage table is printed on stdout; the exit code is summarize's
(0 only when every shard succeeded).`

func newRunCmd(env Env) *cobra.Command {
	o := &runOptions{plan: planOptions{runner: "local", backends: "cpu", testlists: "cpu_smoke", worldSizes: "1"}}
	c := &cobra.Command{
		Use:   "run",
		Short: "Plan, execute every shard, summarize and report: one sweep end to end",
		Long:  runLong,
		Example: `  go run ./cmd/opx run
  opx run --testlists cpu_smoke --world-sizes 1,2 --out /tmp/sweep
  opx run --runner cluster:h200-dgxc --backends vllm --testlists gemm_perf --max-parallel 4`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runRun(c.Context(), env, o) },
	}
	addPlanFlags(c, &o.plan, false)
	f := c.Flags()
	f.StringVar(&o.dir, "out", "", "new or empty directory for the manifest, shard outputs and summary (default .opx-run/<UTC time>-<pid>)")
	f.IntVar(&o.maxParallel, "max-parallel", 1, "shards executed at once on a Slurm runner (local runs one at a time)")
	f.IntVar(&o.timeMinutes, "time-minutes", 60, "time limit per shard, minutes")
	f.IntVar(&o.cleanupSecs, "cleanup-seconds", 180, "how long to wait for an allocation to end")
	return c
}

func runRun(ctx context.Context, env Env, o *runOptions) error {
	if o.maxParallel < 1 {
		return &UsageError{errors.New("--max-parallel must be at least 1")}
	}
	dir := o.dir
	if dir == "" {
		// the pid keeps two runs started in the same second apart
		dir = filepath.Join(".opx-run", time.Now().UTC().Format("20060102T150405Z")+"-"+strconv.Itoa(os.Getpid()))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	shards := filepath.Join(dir, "shards")
	release, err := claimRunDir(dir)
	if err != nil {
		return err
	}
	planned := false
	defer func() { release(planned) }()
	tty := isTerminal(env.Stderr)
	pr := newProgress(env.Stderr, tty, 0, 0)
	manifest := filepath.Join(dir, "operatorx-manifest.json")
	p := o.plan
	p.out = manifest
	if p.sourceSHA == "unknown" { // not given: the commit of the checkout opx runs in, if any
		if sha := gitHead(ctx, "."); sha != "" {
			p.sourceSHA = sha
		}
	}
	pr.logf("planning %s on %s (backends %s, world sizes %s)", p.testlists, p.runner, p.backends, p.worldSizes)
	if err := runPlan(ctx, Env{Stdin: env.Stdin, Stdout: io.Discard, Stderr: env.Stderr, Getenv: env.Getenv, Environ: env.Environ}, &p); err != nil {
		pr.finish()
		return err
	}
	planned = true
	var m struct {
		Include []struct {
			ID, Runner string
			Cases      []json.RawMessage
		} `json:"include"`
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		pr.finish()
		return err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		pr.finish()
		return fmt.Errorf("%s: %v", manifest, err)
	}
	reg, _, err := loadRegistry(p.platformConfig, env)
	if err != nil {
		pr.finish()
		return err
	}
	parallel := o.maxParallel
	if p.runner == "local" {
		parallel = 1 // the ranks already use this machine's devices
	}
	n, cases := len(m.Include), 0
	for _, c := range m.Include {
		cases += len(c.Cases)
	}
	pr.planned(n, cases)
	pr.logf("%d shard(s) of %d case(s), %d at a time; output in %s", n, cases, parallel, dir)
	stderr := pr.writer() // execute's own messages, kept apart from the status line
	// on the first Ctrl-C, say what happens next: the running shards clean up (their
	// allocations cancelled and confirmed gone, their rows collected), then the summary and
	// report of what finished are written
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			pr.logf("%s: no new shard starts; cleaning up %d running shard(s) (allocations cancelled and confirmed gone, rows collected), then writing the summary and report of what finished", oneLine(context.Cause(ctx).Error()), pr.runningShards())
		case <-stopped:
		}
	}()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cell := range m.Include {
		// after a signal no new shard starts, not even one whose turn came while the
		// running ones were cleaning up
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out := filepath.Join(shards, cell.ID)
			t0 := time.Now()
			pr.shardStarted(cell.ID, i+1, len(cell.Cases), out)
			err := shard.Execute(ctx, shard.Options{
				Shard: cell.ID, RunID: p.runID, Attempt: p.attempt, SourceSHA: p.sourceSHA, RunnerName: "opx-run",
				TimeMinutes: o.timeMinutes, CleanupSeconds: o.cleanupSecs, Manifest: manifest, Output: out,
				Registry: reg, Getenv: env.getenv, Environ: env.environ(), Stderr: stderr,
				Stdout: &phaseWriter{fn: func(ph string) { pr.shardPhase(cell.ID, ph) }},
				Slurm:  newSlurm(env),
				BinaryFor: func(imagePlatform string) (string, error) {
					return stagedBinary(imagePlatform, "", "")
				},
			})
			state := "done"
			if err != nil {
				state = "failed: " + oneLine(err.Error())
			}
			pr.shardDone(cell.ID, summary.RowsIn(filepath.Join(out, "results")), state, time.Since(t0))
		}()
	}
	wg.Wait()
	interrupted := context.Cause(ctx)
	if interrupted != nil {
		// what finished is still summarized and reported, with a context of its own
		ctx = context.WithoutCancel(ctx)
	}
	pr.setPhase("summarize")
	rep, err := summary.Summarize(ctx, manifest, shards)
	if err != nil {
		pr.finish()
		return err
	}
	sumPath := filepath.Join(dir, "summary.json")
	if err := files.WriteJSON(sumPath, rep.Value()); err != nil {
		pr.finish()
		return err
	}
	pr.setPhase("report")
	reportPath, err := writeReport(ctx, shards, manifest, filepath.Join(dir, "report.html"))
	pr.finish()
	if err != nil {
		return err
	}
	rep.Markdown(env.Stdout)
	logf := pr.logf
	logf("finished in %.1f s", time.Since(pr.start).Seconds())
	logf("manifest: %s", manifest)
	logf("shard outputs: %s", shards)
	logf("summary: %s", sumPath)
	logf("report: %s", reportPath)
	if err := writeRunRecord(dir, pr.start, p.sourceSHA, interrupted); err != nil {
		return err
	}
	if interrupted != nil {
		return interrupted
	}
	if !rep.Success {
		return &ExitError{Code: 1}
	}
	return nil
}

// runLock is the file that marks a run directory as taken by one opx run.
const runLock = ".opx-run.lock"

// claimRunDir makes dir the output of this run alone: it must be new or empty (a user's
// files there are never overwritten), and a lock file created exclusively in it keeps a
// second opx run out while this one lives. release removes the lock, and the directory too
// when this run created it and planned nothing into it (a failed plan leaves no trace).
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
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.Name() == runLock {
				return nil, fmt.Errorf("another opx run is writing to %s (%s exists); pass a new --out", dir, filepath.Join(dir, runLock))
			}
		}
		if len(ents) > 0 {
			return nil, fmt.Errorf("%s is not empty (it holds %s); opx run writes only into a new or empty --out", dir, ents[0].Name())
		}
	} else if err != nil {
		return nil, err
	}
	lock := filepath.Join(dir, runLock)
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("another opx run is writing to %s (%s exists); pass a new --out", dir, lock)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "pid %d\n", os.Getpid())
	f.Close()
	return func(planned bool) {
		os.Remove(lock)
		if created && !planned {
			os.RemoveAll(dir)
		}
	}, nil
}

// writeRunRecord writes <dir>/run.json: when the sweep started and ended, the source
// commit, the opx version, and whether a signal cut it short.
func writeRunRecord(dir string, start time.Time, sha string, interrupted error) error {
	var why pyjson.Value
	if interrupted != nil {
		why = oneLine(interrupted.Error())
	}
	return files.WriteJSON(filepath.Join(dir, "run.json"), pyjson.Obj(
		"started_at", start.UTC().Format(time.RFC3339), "finished_at", time.Now().UTC().Format(time.RFC3339),
		"source_sha", sha, "opx_version", version.String(), "interrupted", why))
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
