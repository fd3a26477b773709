// opx execute: one shard of a manifest run on its runner (Slurm), start to cleanup.

package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/shard"
)

type executeOptions struct {
	shard, runID, attempt, sourceSHA, runnerName string
	timeMinutes, cleanupSeconds                  int
	manifest, platformConfig, output             string
	binary, binaryArm64, harnessDir              string
	dryRun                                       bool
}

func newExecuteCmd(env Env) *cobra.Command {
	o := &executeOptions{}
	c := &cobra.Command{
		Use:   "execute",
		Short: "Run one shard on its Slurm allocation and always clean up",
		Long: `Run one shard of a manifest: stage it on shared storage, allocate one exclusive node,
import the image on it (pyxis runners), run one rank per GPU, and — whatever happens:
success, a failing benchmark, a cancelled workflow — cancel the allocation, confirm it is
gone, collect every result row and remove the stage. Interrupted by SIGINT, SIGTERM or
SIGHUP it cleans up and exits 128+n; a second signal ends a cleanup still waiting for the
allocation to go, keeping the output and stage for finalize. The allocation carries a
token (--comment) so that finalize and recover find it even if execute was killed outright.

Recipe shards get their checkpoint's config.json from $HF_ENDPOINT (default
https://huggingface.co) into the stage; OPERATORX_MODEL_CONFIG is set only when it came.
--dry-run prints every step's exact command line and environment changes instead, and
touches neither Slurm nor storage.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runExecute(c.Context(), env, o) },
	}
	f := c.Flags()
	f.StringVar(&o.shard, "shard", "", "shard id from the manifest (required)")
	f.StringVar(&o.runID, "run-id", "", "GitHub run id; must match the manifest (required)")
	f.StringVar(&o.attempt, "attempt", "", "GitHub run attempt (required)")
	f.StringVar(&o.sourceSHA, "source-sha", "", "source commit; must match the manifest (required)")
	f.StringVar(&o.runnerName, "runner-name", "", "Slurm job name, normally $RUNNER_NAME (required)")
	f.IntVar(&o.timeMinutes, "time-minutes", 0, "Slurm time limit in minutes (required)")
	f.IntVar(&o.cleanupSeconds, "cleanup-seconds", 0, "how long to wait for the allocation to end (required)")
	f.StringVar(&o.manifest, "manifest", "", "manifest written by plan (required)")
	f.StringVar(&o.platformConfig, "platform-config", "", "platform overlay (default: embedded)")
	f.StringVar(&o.output, "output", "", "new output directory for logs, status and results (required)")
	f.StringVar(&o.binary, "opx-binary", "", "opx binary to stage for linux/amd64 runners (default: this one)")
	f.StringVar(&o.binaryArm64, "opx-binary-arm64", "", "opx binary for linux/arm64 runners (default: opx-linux-arm64 beside this one)")
	f.StringVar(&o.harnessDir, "harness-dir", "", "benchmark harness sources staged as source/ for external backends")
	f.BoolVar(&o.dryRun, "dry-run", false, "print each step's command line and environment changes; run and write nothing")
	for _, r := range []string{"shard", "run-id", "attempt", "source-sha", "runner-name", "time-minutes", "cleanup-seconds", "manifest", "output"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}

func newSlurm(env Env) *shard.Slurm {
	return &shard.Slurm{UID: os.Getuid(), Env: env.environ(), Warn: env.Stderr}
}

func runExecute(ctx context.Context, env Env, o *executeOptions) error {
	if o.timeMinutes <= 0 { // the cluster's minimum is checked with the shard's runner (shard.CheckTime)
		if err := shard.CheckTime(o.timeMinutes, true); err != nil {
			return &UsageError{err}
		}
	}
	reg, _, err := platform.LoadConfig(o.platformConfig)
	if err != nil {
		return err
	}
	opts := shard.Options{
		Shard: o.shard, RunID: o.runID, Attempt: o.attempt, SourceSHA: o.sourceSHA, RunnerName: o.runnerName,
		TimeMinutes: o.timeMinutes, CleanupSeconds: o.cleanupSeconds, Manifest: o.manifest, Output: o.output,
		Registry: reg, HarnessDir: o.harnessDir, Getenv: env.getenv, Environ: env.environ(),
		Stdout: env.Stdout, Stderr: env.Stderr, Slurm: newSlurm(env), DryRun: o.dryRun,
		BinaryFor: func(imagePlatform string) (string, error) {
			return shard.StagedBinary(imagePlatform, o.binary, o.binaryArm64)
		},
	}
	return shard.Execute(ctx, opts)
}
