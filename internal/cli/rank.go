package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/bench"
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

func newBenchCmd(env Env) *cobra.Command {
	var o bench.Options
	var lists string
	c := &cobra.Command{
		Use:   "bench",
		Short: "opx's built-in cpu backend: benchmark testlist GEMMs on this CPU",
		Long: `The harness of the cpu backend: runs the shapes of the selected
testlists whose split matches OPERATORX_PARALLEL, fp32/fp64 GEMMs with gonum (other dtypes
and op types give 'unsupported' rows), and writes <results-dir>/cpu/<cluster>/<run>.json
from rank 0, checkpointed after every op. --strict exits 1 on any error row.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if lists != "" {
				o.Testlists = strings.Split(lists, ",")
			}
			o.Getenv, o.Environ = env.getenv, env.environ()
			_, err := bench.Run(c.Context(), o, nil)
			return err
		},
	}
	f := c.Flags()
	f.BoolVar(&o.Strict, "strict", false, "record unsupported ops and fail on errors")
	f.StringVar(&o.TestlistDir, "testlist-dir", "", "testlist directory (default: embedded)")
	f.StringVar(&o.ResultsDir, "results-dir", "results", "where to write results")
	f.StringVar(&lists, "testlists", "", "comma-separated testlists (default: $OPERATORX_TESTLISTS, else all)")
	return c
}
