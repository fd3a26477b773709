package cli

import (
	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/summary"
)

func newSummarizeCmd(env Env) *cobra.Command {
	var manifest, artifacts, out string
	c := &cobra.Command{
		Use:   "summarize",
		Short: "Count what every shard of a run measured; exit 1 unless all succeeded",
		Long: `OperatorX's summarize, byte for byte: for each shard of the manifest, the newest attempt
found under --artifacts (every execution.json must belong to the manifest's run and source
SHA), its result rows counted by status, and success when status.json says exit 0, at least
one row is ok and none is an error. Writes the report JSON to --out, prints the markdown
table (fit for $GITHUB_STEP_SUMMARY) on stdout, and exits 1 when coverage is incomplete.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rep, err := summary.Summarize(c.Context(), manifest, artifacts)
			if err != nil {
				return err
			}
			if err := files.WriteJSON(out, rep.Value()); err != nil {
				return err
			}
			rep.Markdown(env.Stdout)
			if !rep.Success {
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&manifest, "manifest", "", "the run's manifest (required)")
	f.StringVar(&artifacts, "artifacts", "", "directory of downloaded shard artifacts (required)")
	f.StringVar(&out, "out", "", "where to write the report JSON (required)")
	for _, r := range []string{"manifest", "artifacts", "out"} {
		_ = c.MarkFlagRequired(r)
	}
	return c
}
