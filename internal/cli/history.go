package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/safe"
)

func newHistoryCmd(env Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "history",
		Short: "Keep every case's results across runs, find where each moved, gate on it",
		Long: `A history store keeps every case of every run added to it: its outcome (measured,
unsupported, error, missing), its headline metric with its spread, its GPU time and where it
was measured (node, GPU, driver, image digest, clocks, throttling, source SHA, opx version).
check finds, in every case's series, the runs where its level shifted (docs/history.md
says how, and how often it is wrong); report draws it.

The store is a SQLite file (--db, else $OPX_HISTORY, else opx-history.db) or a
PostgreSQL database (--db postgres://user@host:port/db). Parallel adds are safe.`,
		Example: `  opx history add .opx-run/latest
  opx history check --fail-on-regression 5 >> "$GITHUB_STEP_SUMMARY"
  opx history report --out history.html`,
	}
	c.AddCommand(newHistoryAddCmd(env), newHistoryCheckCmd(env), newHistoryReportCmd(env))
	return c
}

func newHistoryCheckCmd(env Env) *cobra.Command {
	var db, jsonOut, filter, confirm string
	var failPct float64
	var window int
	var all bool
	o := history.CheckOptions{Options: changes.Defaults}
	c := &cobra.Command{
		Use:   "check",
		Short: "Find where each case's level shifted; gate on new regressions",
		Long: `Find, in every series the newest run touched (--all: every series), the runs where its
level shifted. Each series' newest --lookback runs are read. A shift is called when a rank
test over every split (robust to outliers) clears one Benjamini–Hochberg threshold set over
the tests of all series (--fdr), it is at least --min-change, and the new level is outside
the old runs' own recorded spread. A shift at the newest runs, with fewer than 3 runs
after it, is "suspected"; one or two newest runs must also lie beyond every deviation the
series has shown before: noise the history has seen never makes a change. Each change
names its first run, the ratio of the new level to the old, what changed under it
(source SHA, image digest, driver, GPU, nodes, opx version) and, when it shows on some
nodes only, which. docs/history.md gives the method and its measured error rates.

Markdown for $GITHUB_STEP_SUMMARY goes to stdout, worst first; --json writes every change.

--confirm-manifest FILE writes a manifest of the newest run's suspects (the cells that
measured them, holding only those cases, with exclude_nodes naming where they were
measured: salloc --exclude), for opx run --manifest FILE or the workflow's shards. Adding
that run settles each suspect: confirmed when it measures near the new level, cleared when
near the old one — as noise, or as that node's alone when the node was the odd one out for
several suspects at once (the page and the Markdown count such nodes).
--fail-on-regression PCT exits 1 when a slower change of at least PCT percent starts
within the newest --window runs.`,
		Example: `  opx history check
  opx history check --fail-on-regression 5 --json changes.json >> "$GITHUB_STEP_SUMMARY"
  opx history check --all --filter backend=vllm,cluster=h200-dgxc`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			f, err := parseHistoryFilter(filter)
			if err != nil {
				return &UsageError{err}
			}
			o.Filter, o.All = f, all
			if o.MinChange < 0 || o.FDR <= 0 || o.FDR >= 1 {
				return &UsageError{fmt.Errorf("--min-change must be >= 0 and --fdr between 0 and 1")}
			}
			s, found, err := checkHistory(c.Context(), db, o)
			if err != nil {
				return err
			}
			defer s.Close()
			if jsonOut != "" {
				if err := files.WriteIndented(jsonOut, found); err != nil {
					return err
				}
			}
			found.Markdown(env.Stdout)
			if confirm != "" {
				n, err := s.ConfirmManifest(c.Context(), found, confirm)
				if err != nil {
					return err
				}
				if n == 0 {
					fmt.Fprintln(env.Stderr, "opx history check: no suspect to confirm: no manifest written")
				} else {
					fmt.Fprintf(env.Stderr, "opx history check: %s: %d suspect case(s) to measure again elsewhere: opx run --manifest %s, then opx history add that run\n", confirm, n, confirm)
				}
			}
			if c.Flags().Changed("fail-on-regression") {
				if bad := found.Regressions(failPct, window); len(bad) > 0 {
					fmt.Fprintf(env.Stderr, "opx history check: %d slower change(s) of at least %g%% start in the newest %d run(s); worst: %s %s from run %s\n",
						len(bad), failPct, max(1, window), safe.Text(bad[0].Key), compare.Words(bad[0].Speedup), safe.Text(bad[0].RunID))
					return &ExitError{Code: 1}
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", "", "the store: a SQLite file or postgres:// URL (default $OPX_HISTORY, else opx-history.db)")
	c.Flags().StringVar(&jsonOut, "json", "", "write every change here (JSON)")
	c.Flags().StringVar(&confirm, "confirm-manifest", "", "write a manifest of the newest run's suspects here, each cell excluding the nodes that measured them")
	c.Flags().Float64Var(&failPct, "fail-on-regression", 0, "exit 1 when a slower change of at least PCT percent starts within the newest --window runs")
	c.Flags().IntVar(&window, "window", 1, "how many newest runs --fail-on-regression looks at")
	c.Flags().IntVar(&o.Lookback, "lookback", history.DefaultLookback, "how many newest runs of each series are read")
	c.Flags().BoolVar(&all, "all", false, "check every series, not only those the newest run touched")
	c.Flags().StringVar(&filter, "filter", "", "FIELD=VALUE,... keep these series (fields: "+strings.Join(history.FilterFields, ", ")+")")
	c.Flags().Float64Var(&o.MinChange, "min-change", changes.Defaults.MinChange, "the smallest shift called, as a fraction (0.02: 2%)")
	c.Flags().Float64Var(&o.FDR, "fdr", changes.Defaults.FDR, "the false discovery rate allowed over all series")
	return c
}

// checkHistory opens the store (never creating one) and checks it; the caller closes it.
func checkHistory(ctx context.Context, db string, o history.CheckOptions) (*history.Store, *history.Found, error) {
	s, err := history.Open(ctx, history.DSN(db), false)
	if err != nil {
		return nil, nil, err
	}
	found, err := s.Check(ctx, o)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, found, nil
}

// parseHistoryFilter parses check's --filter FIELD=VALUE[,...].
func parseHistoryFilter(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(history.FilterFields, k) {
			return nil, fmt.Errorf("--filter: %s is not FIELD=VALUE with a field of %s", safe.Text(kv), strings.Join(history.FilterFields, ", "))
		}
		out[k] = v
	}
	return out, nil
}

func newHistoryAddCmd(env Env) *cobra.Command {
	var db, at, manifest string
	c := &cobra.Command{
		Use:   "add RUN_DIR...",
		Short: "Record every case of runs (artifacts or opx run --out directories)",
		Long: `Record every case of each run: the case key (as compare and export have it), its
outcome, headline metric and direction, spread and sample count when recorded, GPU time,
and provenance. The run's time is --at (RFC 3339, for backfills), else when it measured
(its first allocation), else its fingerprints' or run.json's time. Adding a run that is
already there (same run id, same time) writes nothing and says so.`,
		Example: `  opx history add .opx-run/latest
  opx history add --db postgres://opx@db:5432/opx artifacts
  opx history add --at 2026-11-30T02:00:00Z old-artifacts
  opx history add --manifest operatorx-control/operatorx-manifest.json operatorx-artifacts`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if manifest != "" && len(args) > 1 {
				return &UsageError{fmt.Errorf("--manifest names one run's manifest: add one RUN_DIR with it")}
			}
			var when time.Time
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return &UsageError{fmt.Errorf("--at %q: not an RFC 3339 time (2026-11-30T02:00:00Z)", at)}
				}
				when = t
			}
			s, err := history.Open(c.Context(), history.DSN(db), true)
			if err != nil {
				return err
			}
			defer s.Close()
			for _, dir := range args {
				a, err := s.Add(c.Context(), dir, manifest, when)
				if err != nil {
					return err
				}
				if a.Already {
					fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s is already in %s: nothing written\n", dir, a.RunID, a.At.UTC().Format(time.RFC3339), s.Where)
					continue
				}
				what := ""
				if a.Confirms != "" {
					what = ", a confirmation of run " + a.Confirms + "'s suspects"
				}
				fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s%s: %d cases (%d measured) recorded in %s\n",
					dir, a.RunID, a.At.UTC().Format(time.RFC3339), what, a.Cases, a.Measured, s.Where)
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", "", "the store: a SQLite file or postgres:// URL (default $OPX_HISTORY, else opx-history.db)")
	c.Flags().StringVar(&at, "at", "", "the runs' time, RFC 3339 (default: when each measured)")
	c.Flags().StringVar(&manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	return c
}

func newHistoryReportCmd(env Env) *cobra.Command {
	var db, out string
	o := history.CheckOptions{Options: changes.Defaults, All: true}
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
		RunE: func(c *cobra.Command, args []string) error {
			s, found, err := checkHistory(c.Context(), db, o)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := files.WriteAtomicFunc(out, 0o644, found.Page); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "opx history report: %s: %d series, %d changes\n", out, found.Series, len(found.Changes))
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", "", "the store: a SQLite file or postgres:// URL (default $OPX_HISTORY, else opx-history.db)")
	c.Flags().StringVarP(&out, "out", "o", "opx-history.html", "write the page here, atomically")
	c.Flags().IntVar(&o.Lookback, "lookback", history.DefaultLookback, "how many newest runs of each series are read")
	return c
}
