package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/fingerprint"
)

type fingerprintOptions struct {
	phase string
	out   string
}

func newFingerprintCmd(env Env) *cobra.Command {
	o := &fingerprintOptions{}
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
			return runFingerprint(c.Context(), env, o)
		},
	}
	c.Flags().StringVar(&o.phase, "phase", "", "before or after (the benchmark)")
	c.Flags().StringVar(&o.out, "out", "", "where to write the fingerprint JSON (required)")
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagRequired("phase")
	return c
}

func runFingerprint(ctx context.Context, env Env, o *fingerprintOptions) error {
	if o.phase != "before" && o.phase != "after" {
		return &UsageError{fmt.Errorf("--phase must be before or after, not %q", o.phase)}
	}
	f := fingerprint.Take(ctx, o.phase, fingerprint.Options{Env: env.environ()})
	return f.Write(o.out)
}
