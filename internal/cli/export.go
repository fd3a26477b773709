package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/export"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

type exportOptions struct {
	manifest string
	format   string
	out      string
}

func newExportCmd(env Env) *cobra.Command {
	o := &exportOptions{}
	c := &cobra.Command{
		Use:   "export RUN_DIR",
		Short: "Write one flat row per case (CSV or JSON lines) for spreadsheets and databases",
		Long: `Write every result row of a run's chosen shards (the newest attempt of each, as
summarize counts them) as one flat record: key (the case key compare joins on), shard,
attempt, testlist, op_type, args (JSON, keys sorted), args_label, backend, cluster,
runner, world_size, status, message, then every metric — a column each in CSV (empty
where a row lacks it), an object "metrics" in JSON lines. It streams: one results file is
in memory at a time. To stdout, or atomically to --out.

The run's verdict goes to stderr ("run success: ..." or "run failed: ..."; a row written
as ok whose headline metric is missing, not finite or not positive is exported as an
error saying which value it had), and the exit code is 1 when the run measured nothing.`,
		Example: `  opx export .opx-run/latest --format csv --out cases.csv
  opx export artifacts --format jsonl | jq -c 'select(.status != "ok")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runExport(c.Context(), env, o, args)
		},
	}
	c.Flags().StringVar(&o.manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	c.Flags().StringVar(&o.format, "format", "csv", "csv or jsonl")
	c.Flags().StringVarP(&o.out, "out", "o", "", "write here, atomically (default: stdout)")
	return c
}

func runExport(ctx context.Context, env Env, o *exportOptions, args []string) error {
	if !slices.Contains(export.Formats, o.format) {
		return &UsageError{fmt.Errorf("--format %s: one of %s", o.format, strings.Join(export.Formats, ", "))}
	}
	m, err := results.Resolve(args[0], o.manifest, "--manifest")
	if err != nil {
		return err
	}
	if err := files.NotAnInput("--out", o.out, m, args[0]); err != nil {
		return &UsageError{err}
	}
	var v verdict.Verdict
	write := func(w io.Writer) (err error) {
		v, err = export.Write(ctx, m, args[0], o.format, w)
		return err
	}
	if o.out == "" {
		err = write(env.Stdout)
	} else {
		err = files.WriteAtomicFunc(o.out, 0o644, write)
	}
	if err != nil {
		return err
	}
	return sayVerdict(env, "export", v)
}
