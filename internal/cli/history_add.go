// opx history add: record run directories in the store.

package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/spf13/cobra"
)

type historyAddOptions struct {
	storeFlags
	at       string
	manifest string
}

func newHistoryAddCmd(env Env) *cobra.Command {
	o := &historyAddOptions{}
	c := &cobra.Command{
		Use:   "add RUN_DIR...",
		Short: "Record every case of runs (artifacts or opx run --out directories)",
		Long: `Record every case of each run: the case key (as compare and export have it), its
outcome, headline metric and direction, spread and sample count when recorded, GPU time,
and provenance. The run's time is --at (RFC 3339, for backfills), else when it measured
(its first allocation), else its fingerprints' or run.json's time. Adding a run that is
already there (same run id, same first allocation) writes nothing and says so, unless it
changed since (opx run --resume: a newer attempt, more cases measured): then it replaces
the run's points, and says so.

Once the runs are recorded, add makes the check of the newest run (as opx history check
makes it with its defaults) and keeps it in the store, so that opx serve shows it the
moment it sees the add instead of judging every series again. That takes what a check
takes (seconds at 100,000 series); it is said on its own line, and a failure to keep it
is said but never undoes the add.`,
		Example: `  opx history add .opx-run/latest
  opx history add --db postgres://opx@db:5432/opx artifacts
  opx history add --at 2026-11-30T02:00:00Z old-artifacts
  opx history add --manifest operatorx-control/operatorx-manifest.json operatorx-artifacts`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runHistoryAdd(c.Context(), env, o, args)
		},
	}
	o.AddFlags(c.Flags())
	c.Flags().StringVar(&o.at, "at", "", "the runs' time, RFC 3339 (default: when each measured)")
	c.Flags().StringVar(&o.manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	return c
}

func runHistoryAdd(ctx context.Context, env Env, o *historyAddOptions, args []string) error {
	if o.manifest != "" && len(args) > 1 {
		return &UsageError{fmt.Errorf("--manifest names one run's manifest: add one RUN_DIR with it")}
	}
	var when time.Time
	if o.at != "" {
		t, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return &UsageError{fmt.Errorf("--at %q: not an RFC 3339 time (2026-11-30T02:00:00Z)", o.at)}
		}
		when = t
	}
	if err := checkDBTimeout(o.dbTimeout); err != nil { // before any run is read
		return err
	}
	// every run is read before the store is opened (or made): a run that cannot be
	// read leaves no store behind
	read := make([]*history.Run, len(args))
	for i, dir := range args {
		r, err := history.ReadRun(ctx, dir, o.manifest, when)
		if err != nil {
			return err
		}
		read[i] = r
	}
	s, err := o.open(ctx, true)
	if err != nil {
		return err
	}
	defer s.Close()
	wrote := false
	for i, dir := range args {
		a, err := s.Add(ctx, read[i])
		if err != nil {
			return err
		}
		if a.Already {
			fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s is already in %s: nothing written\n", safe.Text(dir), safe.Text(a.RunID), a.At.UTC().Format(time.RFC3339), safe.Text(s.Where))
			continue
		}
		wrote = true
		what := ""
		if a.Confirms != "" {
			what = ", a confirmation of run " + a.Confirms + "'s suspects"
		}
		after := ""
		if r := a.Replaced; r != nil {
			after += fmt.Sprintf("; it replaces the run as the store held it (attempt %d, %d measured)", r.Attempt, r.Measured)
		}
		if a.Extra > 0 {
			after += fmt.Sprintf("; %d extra row(s) of no requested case not recorded", a.Extra)
		}
		if len(a.Escaped) > 0 {
			after += "; kept escaped (a NUL byte as \\x00, invalid UTF-8 as U+FFFD, as both stores can hold them): " + safe.Text(strings.Join(a.Escaped, ", "))
		}
		fmt.Fprintf(env.Stderr, "opx history add: %s: run %s of %s%s: %d cases (%d measured) recorded in %s%s\n",
			safe.Text(dir), safe.Text(a.RunID), a.At.UTC().Format(time.RFC3339), what, a.Cases, a.Measured, safe.Text(s.Where), after)
	}
	if !wrote {
		return nil
	}
	// the check of the newest run, kept for opx serve: its pages show it the moment they
	// see this add, instead of judging every series again (history.Store.KeepCheck)
	start := time.Now()
	n, err := s.KeepCheck(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "opx history add: the runs are recorded; the check kept for opx serve could not be made (opx serve judges the store itself): %s\n", safe.OneLine(err.Error()))
		return nil
	}
	fmt.Fprintf(env.Stderr, "opx history add: the check of the newest run kept for opx serve (%d series judged in %.1f s)\n", n, time.Since(start).Seconds())
	return nil
}
