package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/report"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// sayVerdict is how a command that writes a run out (report, export) ends: the run's
// verdict on stderr, and exit 1 when nothing at all was measured (what it wrote says so).
func sayVerdict(env Env, cmd string, v verdict.Verdict) error {
	fmt.Fprintf(env.Stderr, "opx %s: run %s\n", cmd, v.Line())
	if v.Tally.Measured == 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

type reportOptions struct {
	manifest string
	out      string
}

func newReportCmd(env Env) *cobra.Command {
	o := &reportOptions{}
	c := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Write one self-contained HTML page of what a run measured",
		Long: `Read a run's artifacts — the manifest and every shard's execution.json, status.json and
results — and write one HTML file that needs nothing else (no network; CSS and script
inline), small enough to open at 256 shards x 500 cases. It shows whether every shard ran
(the same shards summarize counts: the newest attempt of each) and, for each that did
not, the phase that failed, why, and the last lines of its log; a summary per op type and
series (backend on cluster ×world size); latency and throughput against each case's size
on shared log axes per op type and hardware; every case in a filtered, sorted, paged
table; one series against another case by case; errors and unsupported rows grouped by
message; and provenance (source SHA, run id and attempts, images and digests, clusters,
hosts, software). It reads one results file at a time.

RUN_DIR is an 'opx run --out' directory or a directory of downloaded artifacts; the
manifest is RUN_DIR/operatorx-manifest.json, or the only file of that name under it,
unless --manifest names it. The page goes to --out (default RUN_DIR/report.html).

The page's headline is the run's verdict, as every command words it; it also goes to
stderr, and the exit code is 1 when the run measured nothing.`,
		Example: `  opx report .opx-run/20261202T124027Z
  opx report artifacts --manifest manifest/operatorx-manifest.json --out operatorx-report.html`,
		Args: func(_ *cobra.Command, args []string) error { // never the current directory by default
			if len(args) != 1 {
				return fmt.Errorf("report takes one run directory (an 'opx run --out' or downloaded artifacts), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runReport(c.Context(), env, o, args)
		},
	}
	c.Flags().StringVar(&o.manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	c.Flags().StringVarP(&o.out, "out", "o", "", "where to write the HTML (default RUN_DIR/report.html)")
	return c
}

func runReport(ctx context.Context, env Env, o *reportOptions, args []string) error {
	dir := args[0]
	if o.out == "" {
		o.out = filepath.Join(dir, "report.html")
	}
	m, err := results.Resolve(dir, o.manifest, "--manifest")
	if err != nil {
		return err
	}
	if err := files.NotAnInput("--out", o.out, m, dir); err != nil {
		return &UsageError{err}
	}
	v, err := report.WriteFile(ctx, o.out, m, dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, o.out)
	return sayVerdict(env, "report", v)
}
