// opx recover: the executions of an earlier, cancelled or crashed run found in its
// downloaded artifacts, and finalized.

package cli

import (
	"fmt"

	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/spf13/cobra"
)

func newRecoverCmd(env Env) *cobra.Command {
	var seconds int
	var artifacts, runID, runner, cfg string
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
			reg, _, err := platform.LoadConfig(cfg)
			if err != nil {
				return err
			}
			r, ok := reg.Runner(runner)
			entry, ok2 := reg.Entry(runner)
			if !ok || !ok2 {
				return fmt.Errorf("unknown runner %s (known: %v)", runner, reg.Labels())
			}
			st, err := platform.StorageOf(runner, entry)
			if err != nil {
				return err
			}
			n, err := shard.Recover(c.Context(), newSlurm(env), artifacts, runID, r, st, env.getenv, seconds)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Recovered %d execution(s) from run %s\n", n, runID)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&seconds, "cleanup-seconds", 0, "how long to wait for each allocation to end (required)")
	f.StringVar(&artifacts, "artifacts", "", "directory of downloaded shard artifacts (required)")
	f.StringVar(&runID, "run-id", "", "the earlier run's id (required)")
	f.StringVar(&runner, "runner", "", "this runner's label (required)")
	f.StringVar(&cfg, "platform-config", "", "platform overlay (default: embedded)")
	for _, r := range []string{"cleanup-seconds", "artifacts", "run-id", "runner"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}
