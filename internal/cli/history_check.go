// opx history check: judge the runs added since the last gate, and gate on what stands.

package cli

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/junit"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/spf13/cobra"
)

// historyCheckOptions are history check's flags.
type historyCheckOptions struct {
	storeFlags
	jsonOut, junitOut, filter, confirm string
	failPct                            float64
	window                             int
	all, newOnly                       bool
	gate                               bool // --fail-on-regression was given
	o                                  history.CheckOptions
}

const historyCheckLong = `Find, in every series the run under test touched (--all: every series), the runs where
its level shifted. The run under test is --run, else the run added last. Each series'
newest --lookback runs are read, and each series is judged on its own — its answer never
depends on what else the store holds or the filter selects — at a level --alpha: the
chance that a series whose level never moved is called changed.

The newest runs (1, 2, 3 or 5) are tested against the level before them (its median and
robust spread: one outlier never hides a shift), from the first night a step appears;
older shifts by a rank test over every split (binary segmentation, each split on its own
evidence). A series needs 5 measured runs to be judged; check lists those it cannot judge
yet. A shift with fewer than 3 runs after it is "suspected". Each change names its first
run, the ratio of the new level to the old, what changed under it (source SHA, image
digest, driver, GPU, nodes, opx version) and the nodes it is confined to when their runs
differ from the others' by more than the noise. docs/history.md gives the method and its
measured error rates.

Markdown for $GITHUB_STEP_SUMMARY goes to stdout, worst first; --json writes every change;
--junit writes JUnit XML for CI test reporters (a testcase per change and per case the run
under test did not measure, a failure for each the gate fails on).

--fail-on-regression PCT exits 1 while a slower change stands and nobody has decided: on
every change that the run under test still measures at its new level and that is slower
by at least PCT percent now (a drift is judged at its size tonight, not its first night's),
every night until its series recovers or the team marks it expected or invalid (opx
history triage ID --state expected, or opx serve); open and acknowledged changes fail. A
later, larger step on the same series is a change of its own and fails again. The gate
also fails on a case the run under test did not measure (error, missing) or no longer
measures (measured before, unsupported now), on a run that measured nothing, and when
there is nothing to judge (no run, or a filter that matches no series). It judges every
run added since the last gate (recorded in the store, per --filter): a night whose check
did not run, or two sweeps sharing a store, never slip a regression past it.
--new-only fails only on the night a change is new (its size then). --window N also fails
on standing slower changes that start within the newest N runs. Each change has a stable
id (in --json and the Markdown); a later check that dates it a run apart keeps its id and
triage.

--confirm-manifest FILE writes a manifest of the run under test's suspects (the cells
that measured them, holding only those cases, with exclude_nodes naming where they were
measured: salloc --exclude), for opx run --manifest FILE or the workflow's shards. Adding
that run settles each suspect: confirmed when it measures near the new level, cleared when
near the old one — as noise, or as that node's alone when the node was the odd one out for
several suspects at once.`

func newHistoryCheckCmd(env Env) *cobra.Command {
	h := &historyCheckOptions{o: history.CheckOptions{Options: changes.Defaults}}
	c := &cobra.Command{
		Use:   "check",
		Short: "Find where each case's level shifted; gate on regressions that stand",
		Long:  historyCheckLong,
		Example: `  opx history check
  opx history check --fail-on-regression 5 --json changes.json >> "$GITHUB_STEP_SUMMARY"
  opx history check --all --filter backend=vllm,cluster=h200-dgxc`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			h.gate = c.Flags().Changed("fail-on-regression")
			return runHistoryCheck(c.Context(), env, h)
		},
	}
	h.AddFlags(c.Flags())
	c.Flags().StringVar(&h.jsonOut, "json", "", "write every change here (JSON)")
	c.Flags().StringVar(&h.junitOut, "junit", "", "write JUnit XML here for CI test reporters: a testcase per change and unmeasured case, a failure per regression")
	c.Flags().StringVar(&h.confirm, "confirm-manifest", "", "write a manifest of the run under test's suspects here, each cell excluding the nodes that measured them")
	c.Flags().Float64Var(&h.failPct, "fail-on-regression", 0, "exit 1 while a slower change of at least PCT percent stands untriaged (open or acknowledged), on a case not measured, or nothing to judge")
	c.Flags().IntVar(&h.window, "window", 1, "--fail-on-regression also fails on slower changes starting within the newest N runs")
	c.Flags().BoolVar(&h.newOnly, "new-only", false, "--fail-on-regression fails only on the night a change is new, not every night it stands")
	c.Flags().StringVar(&h.o.Run, "run", "", "the run under test, by run id (default: the run added last)")
	c.Flags().IntVar(&h.o.Lookback, "lookback", history.DefaultLookback, "how many newest runs of each series are read")
	c.Flags().BoolVar(&h.all, "all", false, "check every series, not only those the run under test touched")
	c.Flags().StringVar(&h.filter, "filter", "", "FIELD=VALUE,... keep these series (fields: "+strings.Join(history.FilterFields, ", ")+")")
	c.Flags().Float64Var(&h.o.MinChange, "min-change", changes.Defaults.MinChange, "the smallest shift called, as a fraction (0.02: 2%)")
	c.Flags().Float64Var(&h.o.Alpha, "alpha", changes.Defaults.Alpha, "per series, the chance that a level that never moved is called changed")
	c.Flags().Float64Var(&h.o.Alpha, "fdr", changes.Defaults.Alpha, "")
	c.Flags().MarkDeprecated("fdr", "each series is judged on its own at --alpha (docs/history.md)")
	return c
}

// runHistoryCheck is history check: the flags checked, the store checked, the outputs
// written, and the gate's answer.
func runHistoryCheck(ctx context.Context, env Env, h *historyCheckOptions) error {
	f, err := parseHistoryFilter(h.filter)
	if err != nil {
		return &UsageError{err}
	}
	h.o.Filter, h.o.All = f, h.all
	if !(h.o.MinChange >= 0) || math.IsInf(h.o.MinChange, 0) || !(h.o.Alpha > 0 && h.o.Alpha < 1) {
		return &UsageError{fmt.Errorf("--min-change must be a finite fraction >= 0 and --alpha between 0 and 1")}
	}
	gate := h.gate
	if gate {
		if err := gatePercent(h.failPct); err != nil {
			return err
		}
	}
	if h.window < 1 {
		return &UsageError{fmt.Errorf("--window %d: must be at least 1", h.window)}
	}
	for _, out := range []struct{ flag, path string }{{"--json", h.jsonOut}, {"--junit", h.junitOut}, {"--confirm-manifest", h.confirm}} {
		if err := notTheStore(out.flag, out.path, h.db); err != nil {
			return err
		}
	}
	var g *history.Gate
	if gate {
		g = &history.Gate{Pct: h.failPct, Window: h.window, NewOnly: h.newOnly}
	}
	s, found, err := checkHistory(ctx, &h.storeFlags, h.o, g)
	if err != nil {
		return err
	}
	defer s.Close()
	if h.jsonOut != "" {
		if err := files.WriteIndented(h.jsonOut, found); err != nil {
			return err
		}
	}
	found.ServeURL, found.Gate = env.getenv("OPX_SERVE_URL"), g
	found.Markdown(env.Stdout)
	if h.confirm != "" {
		n, err := s.ConfirmManifest(ctx, found, h.confirm)
		if err != nil {
			return err
		}
		if n == 0 {
			fmt.Fprintln(env.Stderr, "opx history check: no suspect to confirm: no manifest written")
		} else {
			fmt.Fprintf(env.Stderr, "opx history check: %s: %d suspect case(s) to measure again elsewhere: opx run --manifest %s, then opx history add that run\n", h.confirm, n, h.confirm)
		}
	}
	why := ""
	if gate {
		why = historyGate(found, s.Where, h.o, *g)
		if found.Newest != nil && h.o.Run == "" {
			// the next gate judges every run added after this one
			if err := s.MarkGated(ctx, h.o.Filter, found.Newest); err != nil {
				return err
			}
		}
	}
	if h.junitOut != "" {
		if err := junit.Write(h.junitOut, "opx history check", found.JUnit(g, why), found.At()); err != nil {
			return err
		}
	}
	if why != "" {
		fmt.Fprintln(env.Stderr, "opx history check: "+why)
		return &ExitError{Code: 1}
	}
	return nil
}

// historyGate is why check's gate fails ("" when it passes): nothing to judge, cases the
// run under test did not measure, or regressions new at it.
func historyGate(f *history.Found, where string, o history.CheckOptions, g history.Gate) string {
	switch {
	case f.Newest == nil:
		return fmt.Sprintf("%s holds no run: nothing to judge, the gate fails", where)
	case f.Series == 0 && len(o.Filter) > 0:
		var have []string
		for _, k := range slices.Sorted(maps.Keys(f.FilterValues)) {
			vs := f.FilterValues[k]
			more := ""
			if len(vs) > 20 {
				vs, more = vs[:20], ", …"
			}
			have = append(have, k+": "+safe.Text(strings.Join(vs, ", "))+more)
		}
		return fmt.Sprintf("--filter matches no series of run %s: nothing to judge, the gate fails (the store has %s)", safe.Text(f.Newest.Name()), strings.Join(have, "; "))
	case f.Series == 0:
		return fmt.Sprintf("run %s holds no case: nothing to judge, the gate fails", safe.Text(f.Newest.Name()))
	}
	if n := len(f.Unmeasured); n > 0 {
		u := f.Unmeasured[0]
		return fmt.Sprintf("%d case(s) of run %s were not measured (error or missing); first: %s (%s)", n, safe.Text(u.RunID), safe.Text(u.Key), u.Outcome)
	}
	if st := f.NoLongerMeasured(); len(st) > 0 {
		return fmt.Sprintf("%d case(s) measured before are no longer measured by run %s (%s now); first: %s", len(st), safe.Text(st[0].RunID), st[0].Outcome, safe.Text(st[0].Key))
	}
	if f.MeasuredAtTest == 0 && len(f.Young) == 0 {
		return fmt.Sprintf("run %s measured none of its %d case(s): nothing measured, the gate fails", safe.Text(f.Newest.Name()), f.Series)
	}
	if bad := f.Regressions(g); len(bad) > 0 {
		b := bad[0]
		standing := "standing"
		if g.NewOnly {
			standing = "new"
		}
		return fmt.Sprintf("%d slower change(s) of at least %g%% %s at run %s; worst: %s %s now, since run %s (%s): release it with opx history triage %s --state expected",
			len(bad), g.Pct, standing, safe.Text(f.Newest.Name()), safe.Text(b.Key), compare.Words(b.SpeedupNow), safe.Text(b.RunName()), b.Triage, b.ID)
	}
	if busy := f.UnderContention(g.Pct); len(busy) > 0 {
		b := busy[0]
		vs := compare.Words(b.Speedup) + " than its quiet level"
		if b.Ratio == 0 {
			vs = "no quiet run of it to judge it by"
		}
		return fmt.Sprintf("%d case(s) of run %s measured under contention: re-measure on a quiet machine (each %g%% or more slower than its quiet level, or with none to judge it by; no change is opened on such points); first: %s, %s (%s)",
			len(busy), safe.Text(b.RunID), g.Pct, safe.Text(b.Key), vs, safe.Text(b.Why))
	}
	return ""
}

// checkHistory opens the store (never creating one) and checks it; the caller closes it.
func checkHistory(ctx context.Context, st *storeFlags, o history.CheckOptions, g *history.Gate) (*history.Store, *history.Found, error) {
	if _, needs := changes.Young(0); o.Lookback < needs {
		return nil, nil, &UsageError{fmt.Errorf("--lookback %d: read at least %d runs of each series (a series needs %d to be judged)", o.Lookback, needs, needs)}
	}
	s, err := st.reader(ctx)
	if err != nil {
		return nil, nil, err
	}
	if g != nil && o.Run == "" {
		if o.Since, err = s.Gated(ctx, o.Filter); err != nil {
			s.Close()
			return nil, nil, err
		}
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
