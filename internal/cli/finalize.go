// opx finalize: a shard's cleanup again — its allocations cancelled and confirmed gone,
// its results collected, its stage removed when provably ours (idempotent).

package cli

import (
	"github.com/semianalysis/opx/internal/shard"
	"github.com/spf13/cobra"
)

func newFinalizeCmd(env Env) *cobra.Command {
	var seconds int
	var output string
	c := &cobra.Command{
		Use:   "finalize",
		Short: "Cancel a shard's allocation, collect its results and remove its stage (idempotent)",
		Long: `Repeat execute's cleanup: cancel every allocation named in allocation.log or tagged with
the shard's token, poll until Slurm no longer lists it, copy the stage's results into the
output directory and remove the stage. Safe to run again; a missing output is a no-op.
A stage it cannot prove is ours is kept, with the reason. With the controller down it
still removes a stage that provably never had a job (no allocation.log, or salloc's own
refusal and no job named); a signal ends it, keeping what it has not confirmed.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return shard.Finalize(c.Context(), newSlurm(env), output, seconds)
		},
	}
	c.Flags().IntVar(&seconds, "cleanup-seconds", 0, "how long to wait for each allocation to end (required)")
	c.Flags().StringVar(&output, "output", "", "execute's output directory (required)")
	_ = c.MarkFlagRequired("cleanup-seconds")
	_ = c.MarkFlagRequired("output")
	return c
}
