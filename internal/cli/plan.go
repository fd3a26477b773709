package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/plan"
)

type planOptions = plan.Request

const planLong = `Plan a sweep: split the selected testlists into shards (one exclusive GPU node each),
resolve every image to a digest, write the manifest, and print the one-line matrix that
GitHub Actions fans out over on stdout (and nothing else there).

The catalog — testlists, the platform registry keyed by runner label, containers.toml —
is embedded in opx; --platform-config, --testlist-dir, --containers and --recipes replace
its parts. Runners: the nine cluster:* labels, custom runners declared in a platform
config (an entry with "cluster"), and "local" (this machine, no Slurm).

Shard ids, manifests and messages are exactly those of InferenceX's OperatorX planner
(ci.py) for the same inputs, so workflows written for it keep working.`

const planExample = `  opx plan --runner cluster:h200-dgxc --backends vllm --testlists gemm_perf \
      --world-sizes 1 --run-id 12 --attempt 1 --source-sha $(git rev-parse HEAD) \
      --chunk-size 500 --out operatorx-manifest.json > operatorx-matrix.json
  opx plan --runner local --backends cpu --testlists cpu_smoke --world-sizes 1 --out plan.json`

func newPlanCmd(env Env) *cobra.Command {
	o := &planOptions{}
	c := &cobra.Command{
		Use:     "plan",
		Short:   "Split a selection into shards and write the manifest",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return plan.Run(c.Context(), o, env.Stdout, env.Stderr, isTerminal(env.Stderr))
		},
	}
	addPlanFlags(c, o, true)
	return c
}

// addPlanFlags declares plan's selection flags on c (opx run shares them); required marks
// the selection flags required, else they keep o's defaults.
func addPlanFlags(c *cobra.Command, o *planOptions, required bool) {
	f := c.Flags()
	req := ""
	if required {
		req = " (required)"
	}
	f.StringVar(&o.Runner, "runner", o.Runner, "runner label, e.g. cluster:h200-dgxc, a custom runner, or local (opx list runners)"+req)
	f.StringVar(&o.Backends, "backends", o.Backends, "comma-separated backends, e.g. vllm,torch or cpu (opx list backends)"+req)
	f.StringVar(&o.Testlists, "testlists", o.Testlists, "comma-separated testlist names (opx list testlists)"+req)
	f.StringVar(&o.WorldSizes, "world-sizes", o.WorldSizes, "comma-separated world sizes from 1,2,4,8"+req)
	f.StringVar(&o.RunID, "run-id", "local", "GitHub run id (part of queue tokens and stage names)")
	f.StringVar(&o.Attempt, "attempt", "1", "GitHub run attempt")
	f.StringVar(&o.SourceSHA, "source-sha", "unknown", "source commit recorded in the manifest")
	f.Int64Var(&o.ChunkSize, "chunk-size", 500, "cases per shard, 1-500")
	f.StringVar(&o.Mode, "mode", "timing", "timing or counters")
	f.StringVar(&o.PlatformConfig, "platform-config", "", "platform overlay JSON keyed by runner label (default: embedded)")
	f.StringVar(&o.TestlistDir, "testlist-dir", "", "directory of <name>.json testlists (default: embedded)")
	f.StringVar(&o.Containers, "containers", "", "containers.toml (default: embedded)")
	f.StringVar(&o.Recipes, "recipes", "", "recipes JSON file (default: none)")
	if required { // opx run's --out is its directory
		f.StringVar(&o.Out, "out", "operatorx-manifest.json", "where to write the manifest")
	}
	f.DurationVar(&o.DigestTimeout, "digest-timeout", 10*time.Second, "registry timeout per image")
	if required {
		for _, req := range []string{"runner", "backends", "testlists", "world-sizes"} {
			_ = c.MarkFlagRequired(req)
		}
	}
}
