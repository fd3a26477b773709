package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/bench"
)

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
