// opx recover: the executions of an earlier, cancelled or crashed run found in its
// downloaded artifacts, and finalized.

package cli

import (
	"context"
	"fmt"

	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/spf13/cobra"
)

type recoverOptions struct {
	seconds   int
	artifacts string
	runID     string
	runner    string
	cfg       string
}

func newRecoverCmd(env Env) *cobra.Command {
	o := &recoverOptions{}
	c := &cobra.Command{
		Use:   "recover",
		Short: "Finalize the executions of an earlier run found in downloaded artifacts",
		Long: `For a workflow re-run after a cancelled or crashed one: walk --artifacts (the earlier
run's downloaded shard outputs), check that every execution.json belongs to --run-id and
--runner and that its stage lies under this user's stage base for that runner, then
finalize each: cancel and confirm its allocation (or stop a local shard's ranks), collect
its results, remove its stage. Idempotent; exits 1 when nothing was found to recover.`,
		Example: `  opx recover --artifacts ./artifacts --run-id 12 --runner cluster:h200-dgxc --cleanup-seconds 180`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runRecover(c.Context(), env, o)
		},
	}
	f := c.Flags()
	f.IntVar(&o.seconds, "cleanup-seconds", 0, "how long to wait for each allocation to end (required)")
	f.StringVar(&o.artifacts, "artifacts", "", "directory of downloaded shard artifacts (required)")
	f.StringVar(&o.runID, "run-id", "", "the earlier run's id (required)")
	f.StringVar(&o.runner, "runner", "", "this runner's label (required)")
	f.StringVar(&o.cfg, "platform-config", "", "platform overlay (default: embedded)")
	for _, r := range []string{"cleanup-seconds", "artifacts", "run-id", "runner"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}

func runRecover(ctx context.Context, env Env, o *recoverOptions) error {
	reg, _, err := platform.LoadConfig(o.cfg)
	if err != nil {
		return err
	}
	r, ok := reg.Runner(o.runner)
	entry, ok2 := reg.Entry(o.runner)
	if !ok || !ok2 {
		return fmt.Errorf("unknown runner %s (known: %v)", o.runner, reg.Labels())
	}
	st, err := platform.StorageOf(o.runner, entry)
	if err != nil {
		return err
	}
	n, err := shard.Recover(ctx, newSlurm(env), o.artifacts, o.runID, r, st, env.getenv, o.seconds)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Recovered %d execution(s) from run %s\n", n, o.runID)
	return nil
}
