package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/report"
	"github.com/semianalysis/opx/internal/results"
)

func newReportCmd(env Env) *cobra.Command {
	var manifest, out string
	c := &cobra.Command{
		Use:   "report [RUN_DIR]",
		Short: "Write one self-contained HTML page of what a run measured",
		Long: `Read a run's artifacts — the manifest and every shard's execution.json, status.json and
results — and write one HTML file that needs nothing else: no network, CSS embedded,
charts as inline SVG. It shows whether every shard ran (the same shards summarize
counts: the newest attempt of each), rows per op type and backend, latency and
throughput per case across backends and hardware, errors and unsupported rows grouped
by message, and provenance (source SHA, run id and attempts, images and digests,
clusters, hosts, software).

RUN_DIR is an 'opx run --out' directory or a directory of downloaded artifacts; the
manifest is RUN_DIR/operatorx-manifest.json, or the only file of that name under it,
unless --manifest names it. The page goes to --out (default RUN_DIR/report.html).`,
		Example: `  opx report .opx-run/20261202T124027Z
  opx report artifacts --manifest manifest/operatorx-manifest.json --out operatorx-report.html`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if out == "" {
				out = filepath.Join(dir, "report.html")
			}
			run, err := results.Open(c.Context(), dir, manifest)
			if err != nil {
				return err
			}
			if err := report.WriteFile(out, run); err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, out)
			return nil
		},
	}
	c.Flags().StringVar(&manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	c.Flags().StringVarP(&out, "out", "o", "", "where to write the HTML (default RUN_DIR/report.html)")
	return c
}

func newCompareCmd(env Env) *cobra.Command {
	var baseManifest, newManifest, jsonOut string
	var failPct, same, noSpread float64
	c := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Find what got faster or slower between two runs",
		Long: `Join two runs' result rows on a stable case key — testlist, op type and args, backend,
world size, cluster — and class each case from its headline metric (latency_us, else
the first metric with a direction): latency and times are better lower, throughput and
bandwidth higher. A change is only called faster or slower when the two runs' spreads
do not overlap (the interquartile range of timing samples when the harness recorded
them, else min–max); a shift inside the noise is "ambiguous", a change below --same is
"same". Without a spread on either side, changes of at least --no-spread are called.
Cases that went from ok to not ok are "broken"; cases in only one run are listed.

Prints a markdown summary on stdout, fit for $GITHUB_STEP_SUMMARY, regressions worst
first; --json writes every case. With --fail-on-regression PCT the exit code is 1 when
any case is slower by PCT percent or more, or broken.

BASE and NEW are run directories ('opx run --out', or downloaded artifacts).`,
		Example: `  opx compare .opx-run/base .opx-run/new
  opx compare base-artifacts new-artifacts --json compare.json --fail-on-regression 5 >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			if same < 0 || noSpread < same {
				return &UsageError{errors.New("need 0 <= --same <= --no-spread")}
			}
			if c.Flags().Changed("fail-on-regression") && failPct < 0 {
				return &UsageError{errors.New("--fail-on-regression must be a percentage >= 0")}
			}
			base, err := results.Open(c.Context(), args[0], baseManifest)
			if err != nil {
				return fmt.Errorf("base: %w", err)
			}
			nw, err := results.Open(c.Context(), args[1], newManifest)
			if err != nil {
				return fmt.Errorf("new: %w", err)
			}
			res := compare.Compare(base, nw, compare.Options{Same: same / 100, NoSpread: noSpread / 100})
			if jsonOut != "" {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				if err := files.WriteAtomic(jsonOut, append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			res.Markdown(env.Stdout)
			if c.Flags().Changed("fail-on-regression") {
				if regs := res.Regressions(failPct); len(regs) > 0 {
					fmt.Fprintf(env.Stderr, "opx compare: %d case(s) regressed by %g %% or more, or broke\n", len(regs), failPct)
					return &ExitError{Code: 1}
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&baseManifest, "base-manifest", "", "BASE's manifest (default: found in BASE)")
	f.StringVar(&newManifest, "new-manifest", "", "NEW's manifest (default: found in NEW)")
	f.StringVar(&jsonOut, "json", "", "write every case's comparison as JSON here")
	f.Float64Var(&failPct, "fail-on-regression", 0, "exit 1 when a case is slower by this many percent or more, or broke")
	f.Float64Var(&same, "same", 100*compare.DefaultOptions.Same, "changes below this percentage are 'same'")
	f.Float64Var(&noSpread, "no-spread", 100*compare.DefaultOptions.NoSpread, "without a spread, changes of this percentage or more are called")
	return c
}
