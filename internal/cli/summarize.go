package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

type summarizeOptions struct {
	manifest  string
	artifacts string
	out       string
	cases     string
	table     bool
}

func newSummarizeCmd(env Env) *cobra.Command {
	o := &summarizeOptions{}
	c := &cobra.Command{
		Use:   "summarize",
		Short: "Count what every shard of a run measured; exit 1 unless the run succeeded",
		Long: `OperatorX's summarize, in its formats: for each shard of the manifest, the newest attempt
found under --artifacts (every execution.json must belong to the manifest's run and source
SHA) and its result rows counted by status. Writes the report JSON to --out, prints the
markdown table (fit for $GITHUB_STEP_SUMMARY) on stdout, and exits 1 unless the run
succeeded.

Each shard's status and the run's success are the verdict every opx command gives: a shard
succeeds when status.json says exit 0 and none of its cases is an error or missing
("unsupported" when every case was answered but none measured); the run when no shard
failed, no case is an error or missing, and every backend measured at least one case. An
ok row whose headline metric is missing, not finite or not positive counts as an error.
Where ci.py's rule (ok > 0 and no error, per shard) agrees, the output is ci.py's, byte
for byte.

Beyond ci.py, it writes the case ledger to --cases (default operatorx-cases.json beside
--out): every requested case with the best row of all attempts (a row an older attempt
wrote is kept when a newer one did not reach the case; an error is replaced by a later
ok), the attempt that wrote it, its share of the GPU time, and what is still missing —
and every attempt with its allocation's GPU-seconds. The verdict and the ledger's account
go to stderr, one line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runSummarize(c.Context(), env, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.manifest, "manifest", "", "the run's manifest (required)")
	f.StringVar(&o.artifacts, "artifacts", "", "directory of downloaded shard artifacts (required)")
	f.StringVar(&o.out, "out", "", "where to write the report JSON (required)")
	f.StringVar(&o.cases, "cases", "", "where to write the case ledger (default operatorx-cases.json beside --out)")
	f.BoolVar(&o.table, "cases-table", false, "after the coverage table, print the ledger's: cases measured and GPU-hours per shard (for $GITHUB_STEP_SUMMARY)")
	for _, r := range []string{"manifest", "artifacts", "out"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}

func runSummarize(ctx context.Context, env Env, o *summarizeOptions) error {
	if o.cases == "" {
		o.cases = filepath.Join(filepath.Dir(o.out), "operatorx-cases.json")
	}
	for flag, path := range map[string]string{"--out": o.out, "--cases": o.cases} {
		if err := files.NotAnInput(flag, path, o.manifest, o.artifacts); err != nil {
			return &UsageError{err}
		}
	}
	ledger, err := results.CreateLedger(o.cases, o.artifacts)
	if err != nil {
		return err
	}
	defer ledger.Close()
	run, err := results.CoverInto(ctx, o.manifest, o.artifacts, ledger)
	if err != nil {
		return err
	}
	rep := run.Summary
	if err := files.WriteJSON(o.out, rep.Value()); err != nil {
		return err
	}
	if err := ledger.Commit(run.Ledger); err != nil {
		return err
	}
	rep.Markdown(env.Stdout)
	if o.table {
		run.Ledger.Markdown(env.Stdout)
	}
	aside, more := run.Ledger.SetAside()
	for _, s := range aside {
		fmt.Fprintf(env.Stderr, "opx summarize: set aside (the attempt is judged without it): %s\n", safe.Text(s))
	}
	if more > 0 {
		fmt.Fprintf(env.Stderr, "opx summarize: … and %d more set aside\n", more)
	}
	fmt.Fprintf(env.Stderr, "opx summarize: %s; ledger: %s\n", run.Ledger.Line(), o.cases)
	if !rep.Success {
		return &ExitError{Code: 1}
	}
	return nil
}
