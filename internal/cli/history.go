package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/history"
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
	c.AddCommand(newHistoryAddCmd(env))
	return c
}

func newHistoryAddCmd(env Env) *cobra.Command {
	var db, at string
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
  opx history add --at 2026-11-30T02:00:00Z old-artifacts`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
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
				a, err := s.Add(c.Context(), dir, when)
				if err != nil {
					return err
				}
				if a.Already {
					fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s is already in %s: nothing written\n", dir, a.RunID, a.At.UTC().Format(time.RFC3339), s.Where)
					continue
				}
				fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s: %d cases (%d measured) recorded in %s\n",
					dir, a.RunID, a.At.UTC().Format(time.RFC3339), a.Cases, a.Measured, s.Where)
			}
			return nil
		},
	}
	c.Flags().StringVar(&db, "db", "", "the store: a SQLite file or postgres:// URL (default $OPX_HISTORY, else opx-history.db)")
	c.Flags().StringVar(&at, "at", "", "the runs' time, RFC 3339 (default: when each measured)")
	return c
}
