package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/fingerprint"
)

func newFingerprintCmd(env Env) *cobra.Command {
	var phase, out string
	c := &cobra.Command{
		Use:   "fingerprint",
		Short: "Record the node a shard runs on: GPUs, driver, clocks, power, throttling (run on the compute node)",
		Long: `Run by execute on the allocated node (one srun step, outside the container) before and
after the benchmark. Writes --out (JSON): the node name, CPU model, kernel, enroot and
pyxis versions, and each GPU's model, serial and UUID, the driver, CUDA or ROCm version,
SM and memory clocks, max SM clock, power limit and draw, ECC and MIG (AMD: compute
partition) state, temperature and throttle reasons with their counters — from
'nvidia-smi -q -x', or 'amd-smi static --json', 'amd-smi metric --json' and
'amd-smi version'. A tool that is absent or fails is named under "missing"; the command
still succeeds, so a shard never fails for want of its fingerprint.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if phase != "before" && phase != "after" {
				return &UsageError{fmt.Errorf("--phase must be before or after, not %q", phase)}
			}
			f := fingerprint.Take(c.Context(), phase, fingerprint.Options{Env: env.environ()})
			return f.Write(out)
		},
	}
	c.Flags().StringVar(&phase, "phase", "", "before or after (the benchmark)")
	c.Flags().StringVar(&out, "out", "", "where to write the fingerprint JSON (required)")
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagRequired("phase")
	return c
}
