// opx history report: the static page of the store's series, changed first.

package cli

import (
	"context"
	"fmt"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/spf13/cobra"
)

func newHistoryReportCmd(env Env) *cobra.Command {
	o := &historyReportOptions{check: history.CheckOptions{Options: changes.Defaults, All: true}}
	c := &cobra.Command{
		Use:   "report",
		Short: "Write the history as one self-contained HTML page",
		Long: `Write one HTML page (no script, nothing fetched) of every series in the store: the
changed series first, worst first, each a plot of its metric over its newest --lookback
runs with the recorded spread, the change points marked and what changed under them
(source SHA, image digest, driver, GPU, nodes, opx version); then every series with its
latest value and its trend over the window. Its size is bounded (60 plots, 5,000 rows; the
rest counted) so that it opens at once at any history size.`,
		Example: `  opx history report --out history.html`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runHistoryReport(c.Context(), env, o)
		},
	}
	o.AddFlags(c.Flags())
	c.Flags().StringVarP(&o.out, "out", "o", "opx-history.html", "write the page here, atomically")
	c.Flags().IntVar(&o.check.Lookback, "lookback", history.DefaultLookback, "how many newest runs of each series are read")
	return c
}

// historyReportOptions are history report's flags.
type historyReportOptions struct {
	storeFlags
	out   string
	check history.CheckOptions
}

func runHistoryReport(ctx context.Context, env Env, o *historyReportOptions) error {
	if err := notTheStore("--out", o.out, o.db); err != nil {
		return err
	}
	s, found, err := checkHistory(ctx, &o.storeFlags, o.check, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := files.WriteAtomicFunc(o.out, 0o644, found.Page); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "opx history report: %s: %d series, %d changes\n", o.out, found.Series, len(found.Changes))
	return nil
}
