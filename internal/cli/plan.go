package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/resume"
	"github.com/semianalysis/opx/internal/safe"
)

type planOptions = plan.Request

// planExtra are plan's flags beyond the seed's.
type planExtra struct {
	resume, manifest, estimateFrom string
	affectedBy, affectedRepo       string
	changed                        func(flag string) bool // whether the command line set it
}

const planLong = `Plan a sweep: split the selected testlists into shards (one exclusive GPU node each),
resolve every image to a digest, write the manifest, and print the one-line matrix that
GitHub Actions fans out over on stdout (and nothing else there).

The catalog — testlists, the platform registry keyed by runner label, containers.toml —
is embedded in opx; --platform-config, --testlist-dir, --containers and --recipes replace
its parts. Runners: the nine cluster:* labels, custom runners declared in a platform
config (an entry with "cluster"), and "local" (this machine, no Slurm).

Shard ids, manifests and messages are exactly those of InferenceX's OperatorX planner
(ci.py) for the same inputs, so workflows written for it keep working.

Beyond ci.py:
  --estimate-from LEDGER  prints on stderr what the sweep should cost in GPU-hours, from
                          an earlier run's case ledger (cases.json, operatorx-cases.json):
                          each case it measured at its own cost, the rest at the mean of
                          their op; without --out it writes no manifest (an estimate
                          alone), and it warns when the ledger is another machine's.
  --resume ARTIFACTS      plans a re-dispatch instead: from the run's manifest (--manifest,
                          else the one in ARTIFACTS) and every attempt's artifacts, a
                          manifest of the same run and shard ids holding only the cases
                          with no ok or unsupported row, for attempt --attempt (default
                          the one after the newest found); the matrix of its shards on
                          stdout, each case and why it is rerun on stderr. The selection
                          flags are not used.
  --affected-by BASE..HEAD  plans only what a change touches (a pull request): the files
                          the commits changed since their merge base with BASE (git diff,
                          in --affected-repo, default .) — a testlist file (under
                          --testlist-dir, else any testlists/NAME.json) selects its
                          testlist, an entry of containers.toml (--containers, else any
                          containers.toml) whose image or digest changed selects its
                          backend on the runner's vendor, and any other file every case;
                          a testlist and an image together plan every case. Each reason is
                          said on stderr; a change that touches none of the selection
                          writes no manifest and exits 0, saying so. docs/pr.md.`

const planExample = `  opx plan --runner cluster:h200-dgxc --backends vllm --testlists gemm_perf \
      --world-sizes 1 --run-id 12 --attempt 1 --source-sha $(git rev-parse HEAD) \
      --chunk-size 500 --out operatorx-manifest.json > operatorx-matrix.json
  opx plan --runner local --backends cpu --testlists cpu_smoke --world-sizes 1 --out plan.json
  opx plan --resume operatorx-artifacts --attempt 2 --out operatorx-resume-manifest.json > operatorx-matrix.json`

func newPlanCmd(env Env) *cobra.Command {
	o := &planOptions{}
	x := &planExtra{}
	c := &cobra.Command{
		Use:     "plan",
		Short:   "Split a selection into shards and write the manifest",
		Long:    planLong,
		Example: planExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			x.changed = c.Flags().Changed
			return runPlan(c.Context(), env, o, x)
		},
	}
	addPlanFlags(c, o, true)
	f := c.Flags()
	f.StringVar(&o.Out, "out", "operatorx-manifest.json", "where to write the manifest (with --resume: default operatorx-resume-manifest.json)")
	f.StringVar(&x.estimateFrom, "estimate-from", "", "an earlier run's case ledger (cases.json): print the sweep's estimated GPU-hours on stderr")
	f.StringVar(&x.resume, "resume", "", "a run's artifacts: plan only the cases they are missing (see above)")
	f.StringVar(&x.manifest, "manifest", "", "with --resume: the run's manifest (default: the one in the artifacts)")
	f.StringVar(&x.affectedBy, "affected-by", "", "BASE..HEAD: plan only the cases the change touches (see above)")
	f.StringVar(&x.affectedRepo, "affected-repo", ".", "with --affected-by: the git repository the change is in")
	return c
}

// runPlan is opx plan with its flags: the manifest written, or --resume's.
func runPlan(ctx context.Context, env Env, o *planOptions, x *planExtra) error {
	if x.resume != "" {
		return planResume(ctx, env, o, x)
	}
	var missing []string
	for _, name := range []string{"backends", "runner", "testlists", "world-sizes"} {
		if !x.changed(name) {
			missing = append(missing, `"`+name+`"`)
		}
	}
	if len(missing) > 0 { // cobra's words; required unless --resume
		return &UsageError{fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", "))}
	}
	if err := checkSourceSHA(x.changed, o); err != nil {
		return err
	}
	if x.affectedBy != "" {
		reg, _, err := platform.LoadConfig(o.PlatformConfig) // its harness paths
		if err != nil {
			return err
		}
		a, err := plan.AffectedBy(ctx, x.affectedRepo, x.affectedBy, o.TestlistDir, o.Containers, reg.Harness())
		var bad *plan.RangeError
		if errors.As(err, &bad) {
			return &UsageError{err}
		}
		if err != nil {
			return err
		}
		o.Affected = a
	}
	var costs []results.CaseCost
	if x.estimateFrom != "" { // read before anything is written
		if files.Same(o.Out, x.estimateFrom) {
			return &UsageError{fmt.Errorf("--out %s is the ledger --estimate-from reads: write the manifest elsewhere", o.Out)}
		}
		var err error
		if costs, err = results.ReadLedgerCosts(ctx, x.estimateFrom); err != nil {
			return err
		}
		if !x.changed("out") {
			// an estimate alone: the plan goes to a file of its own, and no
			// operatorx-manifest.json here is written over
			tmp, err := os.MkdirTemp("", "opx-estimate-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			o.Out = filepath.Join(tmp, "operatorx-manifest.json")
		}
	}
	stdout := env.Stdout
	if x.estimateFrom != "" && !x.changed("out") {
		stdout = io.Discard // no matrix of queue tokens for a manifest that is not kept
	}
	if err := plan.Run(ctx, o, stdout, env.Stderr, isTerminal(env.Stderr)); err != nil {
		return err
	}
	if x.estimateFrom != "" {
		return printEstimate(ctx, env, o.Out, x.estimateFrom, costs)
	}
	return nil
}

// checkSourceSHA refuses an empty --source-sha: the manifest would record no commit, and
// every shard's execute would have to be given the same nothing.
func checkSourceSHA(changed func(string) bool, o *planOptions) error {
	if changed("source-sha") && strings.TrimSpace(o.SourceSHA) == "" {
		return &UsageError{errors.New("--source-sha is empty: give the commit the sweep measures (git rev-parse HEAD), or leave the flag out")}
	}
	return nil
}

// planResume is plan --resume: the re-dispatch of what a run is missing.
func planResume(ctx context.Context, env Env, o *planOptions, x *planExtra) error {
	for _, name := range []string{"runner", "backends", "testlists", "world-sizes", "run-id", "source-sha", "chunk-size", "mode", "estimate-from", "affected-by"} {
		if x.changed(name) {
			return &UsageError{fmt.Errorf("--resume plans the run's own manifest again: drop --%s", name)}
		}
	}
	out := o.Out
	if !x.changed("out") {
		out = "operatorx-resume-manifest.json"
	}
	mpath, err := results.Resolve(x.resume, x.manifest, "--manifest")
	if err != nil {
		return err
	}
	attempt := 0
	if x.changed("attempt") {
		if attempt, err = strconv.Atoi(o.Attempt); err != nil || attempt < 1 {
			return &UsageError{fmt.Errorf("--attempt %q: a resume attempt is a positive integer", o.Attempt)}
		}
	}
	p, err := resume.Make(ctx, mpath, x.resume, attempt)
	if err != nil {
		return err
	}
	if err := files.WriteJSON(out, p.Manifest); err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	fmt.Fprintf(env.Stdout, "%s\n", plan.Matrix(p.Manifest))
	if len(p.Reasons) == 0 {
		fmt.Fprintf(env.Stderr, "opx plan: nothing to resume: every case of %s has an ok or unsupported row (%s holds no shard)\n", mpath, out)
		return nil
	}
	fmt.Fprintf(env.Stderr, "opx plan: attempt %d reruns %d case(s) (%d shape(s) in %d shard(s)); manifest: %s\n", p.Attempt, len(p.Reasons), p.Shapes, p.Cells, out)
	for _, r := range p.Reasons {
		fmt.Fprintf(env.Stderr, "  rerun %s: %s\n", r.Key, r.Why)
	}
	return nil
}

// printEstimate prints the planned sweep's cost from an earlier ledger.
func printEstimate(ctx context.Context, env Env, manifestPath, ledger string, costs []results.CaseCost) error {
	m, err := manifest.LoadOutline(ctx, manifestPath)
	if err != nil {
		return err
	}
	e, err := results.EstimateCost(m, costs)
	if errors.Is(err, results.ErrNothingToEstimate) {
		return fmt.Errorf("--estimate-from %s: cannot estimate: %w", safe.Text(ledger), err)
	}
	if err != nil {
		return err
	}
	unit := "CPU" // the local runner's hours are this machine's CPU's
	for _, cell := range m.Cells {
		if cell.Runner != platform.Local {
			unit = "GPU"
		}
	}
	fmt.Fprintf(env.Stderr, "opx plan: estimate from %s: %s %s-hours for %d case(s), priced from %d case(s) it finished, measured or unsupported (%d at what they cost there, %d at their op's mean, %d at the mean of all)\n",
		ledger, results.Hours(e.GPUSeconds), unit, e.Cases, e.From, e.Known, e.ByOp, e.ByAll)
	// the ledger's hardware against the plan's: another machine's costs are said to be so
	measured := map[string]bool{}
	for _, c := range costs {
		measured[c.Cluster] = true
	}
	for _, cell := range m.Cells {
		if !measured[cell.Cluster] {
			var there []string
			for cl := range measured {
				there = append(there, cl)
			}
			sort.Strings(there)
			fmt.Fprintf(env.Stderr, "opx plan: warning: the ledger measured on %s, this plan runs on %s: the estimate is another machine's costs\n",
				strings.Join(there, ", "), cell.Cluster)
			break
		}
	}
	return nil
}

// addPlanFlags declares plan's selection flags on c (opx run shares them); required says
// in their help that plan needs them (its RunE checks), else they keep o's defaults.
func addPlanFlags(c *cobra.Command, o *planOptions, required bool) {
	f := c.Flags()
	req := ""
	if required {
		req = " (required, unless --resume)"
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
	f.DurationVar(&o.DigestTimeout, "digest-timeout", 10*time.Second, "registry timeout per image")
	completeNames(c, o)
}

// completeNames lets the shell complete --runner, --backends and --testlists with the
// names the catalog (or the flags' own config, testlist dir and containers) holds; a
// comma-separated list completes its last item.
func completeNames(c *cobra.Command, o *planOptions) {
	list := func(names func() []string) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
			done, last := "", typed
			if i := strings.LastIndex(typed, ","); i >= 0 {
				done, last = typed[:i+1], typed[i+1:]
			}
			var out []string
			for _, n := range names() {
				if strings.HasPrefix(n, last) {
					out = append(out, done+n)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
	}
	lo := func() *listOptions {
		return &listOptions{platformConfig: o.PlatformConfig, containers: o.Containers, testlistDir: o.TestlistDir}
	}
	_ = c.RegisterFlagCompletionFunc("runner", list(func() []string {
		rows, _ := listRunners(lo())
		var out []string
		for _, r := range rows {
			out = append(out, r.Runner)
		}
		return out
	}))
	_ = c.RegisterFlagCompletionFunc("backends", list(func() []string {
		rows, _ := listBackends(lo())
		seen := map[string]bool{}
		var out []string
		for _, r := range rows {
			for _, b := range r.Backends {
				if !seen[b] {
					seen[b] = true
					out = append(out, b)
				}
			}
		}
		return out
	}))
	_ = c.RegisterFlagCompletionFunc("testlists", list(func() []string {
		return catalog.NewTestlists(o.TestlistDir).Names()
	}))
}
