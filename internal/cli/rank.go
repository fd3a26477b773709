package cli

import (
	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/rank"
)

func newRankCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "rank",
		Short: "Set up one rank's environment and run the benchmark (inside the container)",
		Long: `Run by srun once per rank: checks SLURM_PROCID, SLURM_LOCALID and
WORLD_SIZE, sets RANK, LOCAL_RANK, PYTHONPATH and a private HOME (made by the rank,
refused when another user made it, removed afterwards), then runs the harness
(opx bench for the cpu backend, python3 -m operatorx otherwise), under ncu or rocprofv3
in counters mode. The stage is /opx, or $OPX_STAGE on runners without a container.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return rank.Run(c.Context(), rank.Options{Getenv: env.getenv, Environ: env.environ(), Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr})
		},
	}
}
