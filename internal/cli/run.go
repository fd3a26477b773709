package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/summary"
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

Everything lands under --out (default .opx-run/<UTC time>): the manifest, one output
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
	f.StringVar(&o.dir, "out", "", "directory for the manifest, shard outputs and summary (default .opx-run/<UTC time>)")
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
		dir = filepath.Join(".opx-run", time.Now().UTC().Format("20060102T150405Z"))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	shards := filepath.Join(dir, "shards")
	if _, err := os.Lstat(shards); err == nil {
		return fmt.Errorf("%s already holds a run; pass a new --out", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tty := isTerminal(env.Stderr)
	pr := newProgress(env.Stderr, tty, 0, 0)
	manifest := filepath.Join(dir, "operatorx-manifest.json")
	p := o.plan
	p.out = manifest
	pr.logf("planning %s on %s (backends %s, world sizes %s)", p.testlists, p.runner, p.backends, p.worldSizes)
	if err := runPlan(ctx, Env{Stdin: env.Stdin, Stdout: io.Discard, Stderr: env.Stderr, Getenv: env.Getenv, Environ: env.Environ}, &p); err != nil {
		pr.finish()
		return err
	}
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
	pr.mu.Lock()
	pr.shards, pr.cases, pr.phase = n, cases, "execute"
	pr.mu.Unlock()
	pr.logf("%d shard(s) of %d case(s), %d at a time; output in %s", n, cases, parallel, dir)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cell := range m.Include {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
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
				Registry: reg, Getenv: env.getenv, Environ: env.environ(), Stderr: env.Stderr,
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
	if ctx.Err() != nil {
		pr.finish()
		return context.Cause(ctx)
	}
	pr.setPhase("summarize")
	rep, err := summary.Summarize(manifest, shards)
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
	reportPath, err := writeReport(shards, manifest, filepath.Join(dir, "report.html"))
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
	if !rep.Success {
		return &ExitError{Code: 1}
	}
	return nil
}
