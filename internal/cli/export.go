package cli

import (
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

func newExportCmd(env Env) *cobra.Command {
	var manifest, format, out string
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
			if !slices.Contains(export.Formats, format) {
				return &UsageError{fmt.Errorf("--format %s: one of %s", format, strings.Join(export.Formats, ", "))}
			}
			m, err := results.Resolve(args[0], manifest, "--manifest")
			if err != nil {
				return err
			}
			if err := files.NotAnInput("--out", out, m, args[0]); err != nil {
				return &UsageError{err}
			}
			var v verdict.Verdict
			write := func(w io.Writer) (err error) {
				v, err = export.Write(c.Context(), m, args[0], format, w)
				return err
			}
			if out == "" {
				err = write(env.Stdout)
			} else {
				err = files.WriteAtomicFunc(out, 0o644, write)
			}
			if err != nil {
				return err
			}
			return sayVerdict(env, "export", v)
		},
	}
	c.Flags().StringVar(&manifest, "manifest", "", "the run's manifest (default: found in RUN_DIR)")
	c.Flags().StringVar(&format, "format", "csv", "csv or jsonl")
	c.Flags().StringVarP(&out, "out", "o", "", "write here, atomically (default: stdout)")
	return c
}
