package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/sweep"
	"github.com/spf13/cobra"
)

type runOptions struct {
	plan                                  planOptions
	dir, resume, manifest                 string
	maxParallel, timeMinutes, cleanupSecs int
	changed                               func(flag string) bool // whether the command line set it
	ab                                    abFlags
}

func runRun(ctx context.Context, env Env, o *runOptions) error {
	if o.maxParallel < 1 {
		return &UsageError{errors.New("--max-parallel must be at least 1")}
	}
	if err := checkSourceSHA(o.changed, &o.plan); err != nil {
		return err
	}
	if o.manifest != "" {
		if o.resume != "" {
			return &UsageError{errors.New("--manifest and --resume: one or the other")}
		}
		for _, name := range []string{"runner", "backends", "testlists", "world-sizes", "run-id", "attempt", "source-sha", "chunk-size", "mode", "testlist-dir", "containers", "recipes"} {
			if o.changed(name) {
				return &UsageError{fmt.Errorf("--manifest runs that manifest as it is: drop --%s", name)}
			}
		}
	}
	if o.resume != "" {
		for _, name := range []string{"out", "runner", "backends", "testlists", "world-sizes", "run-id", "attempt", "source-sha", "chunk-size", "mode", "testlist-dir", "containers", "recipes"} {
			if o.changed(name) {
				return &UsageError{fmt.Errorf("--resume reruns the run's own manifest in its own directory: drop --%s", name)}
			}
		}
	}
	sides, cleanup, err := o.ab.sides(ctx, o.changed)
	if err != nil {
		return err
	}
	defer cleanup()
	if sides != nil && o.resume != "" {
		return &UsageError{errors.New("--resume reruns a run as it was: drop --ab-base and --ab-head (an A/B run is run again, not resumed)")}
	}
	// the runner the flags name (a --manifest or --resume run's is checked per shard)
	if err := shard.CheckTime(o.timeMinutes, o.manifest != "" || o.resume != "" || o.plan.Runner == platform.Local); err != nil {
		return &UsageError{err}
	}
	err = sweep.Run(ctx, sweep.Options{Plan: o.plan, Dir: o.dir, Resume: o.resume, Manifest: o.manifest, MaxParallel: o.maxParallel, TimeMinutes: o.timeMinutes,
		CleanupSecs: o.cleanupSecs, Getenv: env.getenv, Environ: env.environ(), Stdout: env.Stdout, Stderr: env.Stderr,
		Terminal: isTerminal(env.Stderr), AB: sides})
	// a selection the planner refuses (an unknown runner, testlist or backend) exits 1,
	// as opx plan does (ci.py's exit code for them): one code for one mistake
	return err
}

const runLong = `Plan a sweep, execute every shard, and summarize it — in one command. With no flags it
runs opx's own cpu backend on this machine (runner local, testlist cpu_smoke, world size
1), so a newcomer gets a real sweep from 'go build -o opx ./cmd/opx && ./opx run'. The same command drives
a Slurm cluster from a login node: pass a cluster runner (or a custom one from
--platform-config) and --max-parallel to run that many shards at once.

Everything lands under --out (default .opx-run/<UTC time>-<pid>), which must be new or
empty: a user's files are never overwritten, and a second opx run into the same
directory is refused while the first lives: the manifest, one output
directory per shard under shards/ (execute's layout: logs, status.json, results/),
summary.json and report.html (opx report's page). On a terminal a status line shows the
phase, shard k/N, case i/M and the time elapsed; otherwise plain log lines. The coverage table is printed on stdout, the run's verdict last on stderr, and the exit
code is 0 only when it is success: no case error or missing, no shard failed, and every
backend measured at least one case (an unsupported case is answered, not measured; a
backend that measured nothing fails the run, saying so). It also writes cases.json, the case ledger: every
requested case with its best row over all attempts, the attempt that wrote it and its
share of the GPU-hours.

--resume DIR pays for each case once: it finalizes the executions that run left
unfinished (killed: their allocations cancelled, checkpointed rows collected), then runs
the next attempt holding only the cases with no ok or unsupported row (it logs each one
and why), into DIR/shards/<shard>.attempt-N, and summarizes the whole run again.

--ab-base SIDE --ab-head SIDE measures every shard as a paired A/B (a pull request's
base and head): in rounds on its one allocation, one side after the other in ABBA order,
each case judged from its pairs (the ratio head/base, its 99% interval, slower, faster,
same or unsure). A SIDE is comma-separated tree=DIR (the harness tree staged as source/),
commit=REV (that tree's repository at REV) and env=NAME=VALUE. ab.json in the run
directory is the report opx github report posts; the exit code is 1 when the check fails
(a case slower beyond --ab-threshold at the level of all the run's cases, a case the head
lost, or an A/B that ended before it could judge). See docs/pr.md.

Ctrl-C (or SIGTERM) stops cleanly: no new shard starts, the running ones cancel their
allocations and save their rows, what finished is summarized, and the last line is the
opx run --resume that runs only what is missing. A second Ctrl-C stops at once: a shard
whose allocation is not yet confirmed gone keeps its output and stage for opx finalize.`

func newRunCmd(env Env) *cobra.Command {
	o := &runOptions{plan: planOptions{Runner: "local", Backends: "cpu", Testlists: "cpu_smoke", WorldSizes: "1"}}
	c := &cobra.Command{
		Use:   "run",
		Short: "Plan, execute every shard, summarize and report: one sweep end to end",
		Long:  runLong,
		Example: `  go run ./cmd/opx run
  opx run --testlists cpu_smoke --world-sizes 1,2 --out /tmp/sweep
  opx run --runner cluster:h200-dgxc --backends vllm --testlists gemm_perf --max-parallel 4
  opx run --resume .opx-run/20261203T101500Z-4242   # only what that run is missing
  opx run --ab-base env=OPX_SIDE=base --ab-head env=OPERATORX_CPU_REPEAT=2   # an A/B: a head twice as slow, found`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.changed = c.Flags().Changed
			return runRun(c.Context(), env, o)
		},
	}
	addPlanFlags(c, &o.plan, false)
	f := c.Flags()
	f.StringVar(&o.dir, "out", "", "new or empty directory for the manifest, shard outputs and summary (default .opx-run/<UTC time>-<pid>)")
	f.StringVar(&o.resume, "resume", "", "an earlier opx run's directory: finalize what it left unfinished, then run only the cases with no ok or unsupported row, as its next attempt")
	f.StringVar(&o.manifest, "manifest", "", "run this manifest as it is instead of planning one (opx history check --confirm-manifest writes one)")
	f.IntVar(&o.maxParallel, "max-parallel", 1, "shards executed at once on a Slurm runner (local runs one at a time)")
	f.IntVar(&o.timeMinutes, "time-minutes", 60, "time limit per shard, minutes")
	f.IntVar(&o.cleanupSecs, "cleanup-seconds", 180, "how long to wait for an allocation to end")
	f.StringVar(&o.ab.base, "ab-base", "", "a paired A/B's base side: "+abSideHelp)
	f.StringVar(&o.ab.head, "ab-head", "", "a paired A/B's head side (the change under test), as --ab-base")
	f.IntVar(&o.ab.minPairs, "ab-min-pairs", ab.Defaults.MinPairs, "rounds every case of an A/B is measured in (a pair each)")
	f.IntVar(&o.ab.maxPairs, "ab-max-pairs", ab.Defaults.MaxPairs, "rounds an unsure case may get, within the shard's time")
	f.Float64Var(&o.ab.threshold, "ab-threshold", 100*ab.Defaults.Threshold, "percent: an A/B fails on a case slower beyond it (its whole 99% interval)")
	return c
}
