package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/doctor"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/suggest"
)

type doctorOptions struct {
	runner         string
	platformConfig string
	amd64          string
	arm64          string
	minFree        float64
	asJSON         bool
}

func newDoctorCmd(env Env) *cobra.Command {
	o := &doctorOptions{}
	c := &cobra.Command{
		Use:   "doctor --runner LABEL",
		Short: "Check this submit host has everything a runner's shards need",
		Long: `Check, before any GPU node is allocated, what a shard of --runner will need on this host:
the platform entry (gpus_per_node, image_platform, partition, container mode); salloc,
srun, scancel, squeue and sinfo on PATH, the controller answering and the partition
known; for pyxis runners, srun accepting --container-image, enroot and its version
(4.0 or newer imports digest-pinned URIs; older ones only by tag), unsquashfs and the
enroot cache; the shared storage root execute will stage under, writable and with
--min-free-gib free; and the opx binary for the runner's architecture.

Prints a table of findings and, for each problem, what to do; --json prints them as
{"runner", "ready", "findings": [{"check", "status", "detail", "fix"}]} for scripts.
Exit 1 when something required is missing; warnings alone exit 0.`,
		Example: `  opx doctor --runner cluster:h200-dgxc
  opx doctor --runner cluster:my-cluster --platform-config platforms.json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDoctor(c.Context(), env, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.runner, "runner", "", "the runner label to check (required)")
	f.StringVar(&o.platformConfig, "platform-config", "", "platform overlay JSON (default: the embedded one)")
	f.Float64Var(&o.minFree, "min-free-gib", 20, "free space the storage root needs, GiB")
	f.StringVar(&o.amd64, "opx-binary", "", "the linux/amd64 opx binary execute would stage")
	f.StringVar(&o.arm64, "opx-binary-arm64", "", "the linux/arm64 opx binary execute would stage")
	f.BoolVar(&o.asJSON, "json", false, "print the findings as JSON")
	_ = c.MarkFlagRequired("runner")
	return c
}

func runDoctor(ctx context.Context, env Env, o *doctorOptions) error {
	if o.minFree < 0 {
		return &UsageError{errors.New("--min-free-gib must be >= 0")}
	}
	reg, src, err := platform.LoadConfig(o.platformConfig)
	if err != nil {
		return err
	}
	entry, ok := reg.Facts(o.runner)
	if !ok {
		return &UsageError{fmt.Errorf("unknown runner %s: %s has no entry for it (runners: %s)%s", safe.Text(o.runner), src,
			strings.Join(reg.Labels(), ", "), didYouMeanRunner(o.runner, reg.Labels()))}
	}
	fs := doctor.Run(ctx, doctor.Options{Entry: entry, Getenv: env.getenv, Environ: env.environ(),
		MinFree: uint64(o.minFree * (1 << 30)),
		Binary:  func(ip string) (string, error) { return shard.StagedBinary(ip, o.amd64, o.arm64) }})
	if o.asJSON {
		if err := doctor.WriteJSON(env.Stdout, o.runner, fs); err != nil {
			return err
		}
	} else {
		doctor.Write(env.Stdout, o.runner, fs)
	}
	if doctor.Failed(fs) {
		return &ExitError{Code: 1}
	}
	return nil
}

// didYouMeanRunner is "; did you mean cluster:h200-dgxc?" for a runner named by part of
// its label (h200) or within two edits of one, else "".
func didYouMeanRunner(name string, labels []string) string {
	var hits []string
	for _, l := range labels {
		if name != "" && strings.Contains(l, name) {
			hits = append(hits, l)
		}
	}
	if len(hits) == 0 {
		if best := suggest.Closest(name, labels); best != "" {
			hits = []string{best}
		}
	}
	if len(hits) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(hits, " or ") + "?"
}
