package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/junit"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

type compareOptions struct {
	baseManifest, newManifest, jsonOut, junit string
	failPct, same, noSpread                   float64
	key, baseFilter, newFilter                string
	allowMissing, allowSame                   bool
}

const compareLong = `Join two runs' result rows on a stable case key — testlist, op type and args, backend,
world size, cluster — and class each case from its headline metric (latency_us, else
the first metric with a direction): latency and times are better lower, throughput and
bandwidth higher. The change is one speed-up, said one way in the summary and the JSON:
"1.53x faster" or "1.53x slower" (JSON: ratio = new/base, speedup = base/new for a time,
new/base for a throughput). A change is only called faster or slower when the two runs'
spreads do not overlap (the interquartile range of timing samples when the harness
recorded them, else min–max); a shift inside the noise is "ambiguous", a change below
--same is "same". Without a spread on either side, changes of at least --no-spread are
called. Cases that went from ok to not ok are "broken"; cases in only one run are listed.

--key joins on fewer fields (e.g. --key testlist,op,args,world_size to compare across
clusters and backends), and --base-filter/--new-filter FIELD=VALUE[,...] pick rows, so
one run can be compared with itself: opx compare RUN RUN --key testlist,op,args,world_size,cluster
--base-filter backend=vllm --new-filter backend=sglang. Fields: testlist, op, args,
backend, world_size, cluster (and runner, status in filters).

Prints a markdown summary on stdout, fit for $GITHUB_STEP_SUMMARY, regressions worst
first; --json writes every case; --junit writes JUnit XML for CI test reporters (a
testcase per case, a failure per case the gate fails on, or without the gate per slower
or broken case; cases in one run only are skipped). With --fail-on-regression PCT the exit code is 1 when
any case is slower by a factor of 1 + PCT/100 or more (5: a time 1.05x longer, a
throughput 1.05x lower), or broken (ok in base, not ok in new), or in the base and
missing from the new run, or when a run's rows are not unique on --key (one example is
named); --allow-missing lets missing cases pass. Whatever the flags, compare exits 1 when
either side has no measured case after its filter (the values the filtered fields do
have are listed): a comparison of nothing proves nothing. A row written as ok whose
headline metric is missing, not finite or not positive is an error (broken, if it was ok
in the base); a recorded spread that is inverted, below zero or does not contain its
value is ignored with a warning, and its case judged as one without a spread.

BASE and NEW are run directories ('opx run --out', or downloaded artifacts). One run is
never its own baseline: two sides that are the same run directory (through links, such as
.opx-run/latest) with the same rows picked, or two copies of one run (the same run id and
first allocation), are refused (exit 2) unless --allow-same: a gate that compares a run
with itself always passes.`

func newCompareCmd(env Env) *cobra.Command {
	o := &compareOptions{}
	c := &cobra.Command{
		Use:   "compare BASE NEW",
		Short: "Find what got faster or slower between two runs",
		Long:  compareLong,
		Example: `  opx compare .opx-run/base .opx-run/new
  opx compare base-artifacts new-artifacts --json compare.json --fail-on-regression 5 >> "$GITHUB_STEP_SUMMARY"
  opx compare run run --key testlist,op,args,world_size --base-filter cluster=h100_dgxc_8x --new-filter cluster=h200_dgxc_8x`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			return runCompare(c.Context(), env, o, args, c.Flags().Changed("fail-on-regression"))
		},
	}
	f := c.Flags()
	f.StringVar(&o.baseManifest, "base-manifest", "", "BASE's manifest (default: found in BASE)")
	f.StringVar(&o.newManifest, "new-manifest", "", "NEW's manifest (default: found in NEW)")
	f.StringVar(&o.jsonOut, "json", "", "write every case's comparison as JSON here")
	f.StringVar(&o.junit, "junit", "", "write JUnit XML here for CI test reporters: a testcase per case, a failure per regression")
	f.Float64Var(&o.failPct, "fail-on-regression", 0, "exit 1 when a case is slower by a factor of 1 + PCT/100 or more, broke, or is missing from NEW")
	f.BoolVar(&o.allowMissing, "allow-missing", false, "with --fail-on-regression: cases missing from NEW do not fail the gate")
	f.BoolVar(&o.allowSame, "allow-same", false, "compare a run with itself (the same directory or a copy of one run): refused otherwise")
	f.Float64Var(&o.same, "same", 100*compare.DefaultOptions.Same, "changes below this percentage are 'same'")
	f.Float64Var(&o.noSpread, "no-spread", 100*compare.DefaultOptions.NoSpread, "without a spread, changes of this percentage or more are called")
	f.StringVar(&o.key, "key", strings.Join(results.KeyFields, ","), "case-key fields the runs are joined on")
	f.StringVar(&o.baseFilter, "base-filter", "", "compare only BASE rows with these FIELD=VALUE[,...]")
	f.StringVar(&o.newFilter, "new-filter", "", "compare only NEW rows with these FIELD=VALUE[,...]")
	return c
}

func runCompare(ctx context.Context, env Env, o *compareOptions, args []string, gate bool) error {
	if !(o.same >= 0) || !(o.noSpread >= o.same) || math.IsInf(o.noSpread, 0) {
		return &UsageError{errors.New("need 0 <= --same <= --no-spread, both finite")}
	}
	if gate {
		if err := gatePercent(o.failPct); err != nil {
			return err
		}
	}
	opt := compare.Options{Same: o.same / 100, NoSpread: o.noSpread / 100}
	var err error
	if opt.Key, err = compare.ParseKey(o.key); err != nil {
		return &UsageError{err}
	}
	if opt.Base, err = compare.ParseFilter("--base-filter", o.baseFilter); err != nil {
		return &UsageError{err}
	}
	if opt.New, err = compare.ParseFilter("--new-filter", o.newFilter); err != nil {
		return &UsageError{err}
	}
	manifests := []string{o.baseManifest, o.newManifest}
	for i, side := range []string{"base", "new"} {
		m, err := results.Resolve(args[i], manifests[i], "--"+side+"-manifest")
		if err != nil {
			return fmt.Errorf("%s: %w", side, err)
		}
		for _, out := range []struct{ flag, path string }{{"--json", o.jsonOut}, {"--junit", o.junit}} {
			if err := files.NotAnInput(out.flag, out.path, m, args[i]); err != nil {
				return &UsageError{err}
			}
		}
		manifests[i] = m
	}
	var base, nw *compare.Run
	sameDir := files.Same(args[0], args[1]) && files.Same(manifests[0], manifests[1])
	if sameDir && o.baseFilter == o.newFilter && !o.allowSame {
		return &UsageError{fmt.Errorf("BASE and NEW are the same run (%s): a run compared with itself always passes; give an earlier run as BASE, pick other rows with --base-filter/--new-filter, or pass --allow-same", safe.Text(args[1]))}
	}
	if sameDir { // one run: read once
		if base, nw, err = compare.ReadSame(ctx, args[0], manifests[0], opt.Key, opt.Base, opt.New); err != nil {
			return fmt.Errorf("base: %w", err)
		}
	} else {
		if base, err = compare.Read(ctx, args[0], manifests[0], opt.Key, opt.Base); err != nil {
			return fmt.Errorf("base: %w", err)
		}
		if nw, err = compare.ReadNew(ctx, base, args[1], manifests[1], opt.New); err != nil {
			return fmt.Errorf("new: %w", err)
		}
	}
	if !sameDir && !o.allowSame && base.Side.RunID == nw.Side.RunID && base.Side.At != "" && base.Side.At == nw.Side.At {
		return &UsageError{fmt.Errorf("BASE (%s) and NEW (%s) are copies of one run (run %s, first allocation %s): a run compared with itself always passes; give another run as BASE, or pass --allow-same",
			safe.Text(args[0]), safe.Text(args[1]), safe.Text(base.Side.RunID), base.Side.At)}
	}
	res := compare.Join(base, nw, opt)
	if o.jsonOut != "" {
		if err := files.WriteAtomicFunc(o.jsonOut, 0o644, func(w io.Writer) error { return res.WriteJSON(ctx, w) }); err != nil {
			return err
		}
	}
	if o.junit != "" {
		if err := junit.Write(o.junit, "opx compare", res.JUnit(gate, o.failPct, o.allowMissing), res.At()); err != nil {
			return err
		}
	}
	res.Markdown(env.Stdout)
	for _, w := range res.Warnings {
		fmt.Fprintf(env.Stderr, "opx compare: warning: %s\n", safe.OneLine(w))
	}
	failed := false
	for _, p := range res.Problems { // nothing measured fails compare; a key that is not unique, the gate
		if res.Empty() || gate {
			fmt.Fprintf(env.Stderr, "opx compare: %s\n", safe.OneLine(p))
			failed = true
		} else {
			fmt.Fprintf(env.Stderr, "opx compare: warning: %s\n", safe.OneLine(p))
		}
	}
	if gate {
		var plain, contended []compare.Case
		for _, c := range res.Regressions(o.failPct, o.allowMissing) {
			if (c.Class != compare.Broken && c.Class != compare.OnlyBase) && compare.UnderContention(&c) != "" {
				contended = append(contended, c)
			} else {
				plain = append(plain, c)
			}
		}
		if len(plain) > 0 {
			fmt.Fprintf(env.Stderr, "opx compare: %d case(s) slower by a factor of %g or more, broken, or missing from NEW (%s)\n",
				len(plain), 1+o.failPct/100, compare.Counts(plain))
			failed = true
		}
		if len(contended) > 0 {
			fmt.Fprintf(env.Stderr, "opx compare: measured under contention: re-measure: %d case(s) cannot be judged — slower by a factor of %g or more, or against a base that was contended; run them again on a quiet machine (e.g. %s: %s, %s)\n",
				len(contended), 1+o.failPct/100, safe.Text(contended[0].Key), contended[0].Class, compare.UnderContention(&contended[0]))
			failed = true
		}
	}
	if failed {
		return &ExitError{Code: 1}
	}
	return nil
}
