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
directory per shard under shards/ (execute's layout: logs, status.json, results/), and
summary.json. The coverage table is printed on stdout; the exit code is summarize's
(0 only when every shard succeeded).`

func newRunCmd(env Env) *cobra.Command {
	o := &runOptions{plan: planOptions{runner: "local", backends: "cpu", testlists: "cpu_smoke", worldSizes: "1"}}
	c := &cobra.Command{
		Use:   "run",
		Short: "Plan, execute every shard and summarize: one sweep end to end",
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
	logf := func(format string, a ...any) { fmt.Fprintf(env.Stderr, "opx run: "+format+"\n", a...) }
	manifest := filepath.Join(dir, "operatorx-manifest.json")
	p := o.plan
	p.out = manifest
	start := time.Now()
	logf("planning %s on %s (backends %s, world sizes %s)", p.testlists, p.runner, p.backends, p.worldSizes)
	if err := runPlan(ctx, Env{Stdin: env.Stdin, Stdout: io.Discard, Stderr: env.Stderr, Getenv: env.Getenv, Environ: env.Environ}, &p); err != nil {
		return err
	}
	var m struct {
		Include []struct {
			ID, Runner string
		} `json:"include"`
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %v", manifest, err)
	}
	reg, _, err := loadRegistry(p.platformConfig, env)
	if err != nil {
		return err
	}
	parallel := o.maxParallel
	if p.runner == "local" {
		parallel = 1 // the ranks already use this machine's devices
	}
	n := len(m.Include)
	logf("%d shard(s), %d at a time; output in %s", n, parallel, dir)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
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
			mu.Lock()
			logf("shard %d/%d %s: started", i+1, n, cell.ID)
			mu.Unlock()
			err := shard.Execute(ctx, shard.Options{
				Shard: cell.ID, RunID: p.runID, Attempt: p.attempt, SourceSHA: p.sourceSHA, RunnerName: "opx-run",
				TimeMinutes: o.timeMinutes, CleanupSeconds: o.cleanupSecs, Manifest: manifest, Output: out,
				Registry: reg, Getenv: env.getenv, Environ: env.environ(), Stdout: io.Discard, Stderr: env.Stderr,
				Slurm: newSlurm(env),
				BinaryFor: func(imagePlatform string) (string, error) {
					return stagedBinary(imagePlatform, "", "")
				},
			})
			mu.Lock()
			defer mu.Unlock()
			done++
			state := "done"
			if err != nil {
				state = "failed: " + oneLine(err.Error())
			}
			logf("shard %d/%d %s: %s in %.1f s (%d/%d finished)", i+1, n, cell.ID, state, time.Since(t0).Seconds(), done, n)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	rep, err := summary.Summarize(manifest, shards)
	if err != nil {
		return err
	}
	sumPath := filepath.Join(dir, "summary.json")
	if err := files.WriteJSON(sumPath, rep.Value()); err != nil {
		return err
	}
	rep.Markdown(env.Stdout)
	logf("finished in %.1f s", time.Since(start).Seconds())
	logf("manifest: %s", manifest)
	logf("shard outputs: %s", shards)
	logf("summary: %s", sumPath)
	if !rep.Success {
		return &ExitError{Code: 1}
	}
	return nil
}
