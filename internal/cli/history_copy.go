// opx history copy: a whole store into a new or empty one (SQLite to PostgreSQL, back).

package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/safe"
)

type historyCopyOptions struct {
	from      string
	to        string
	dbTimeout time.Duration
}

func newHistoryCopyCmd(env Env) *cobra.Command {
	o := &historyCopyOptions{}
	c := &cobra.Command{
		Use:   "copy --from STORE --to STORE",
		Short: "Copy a whole history store into a new one (SQLite to PostgreSQL, or back)",
		Long: `Copy every run, series, point, confirmation, triage event and the gate's records of one
store into another, each with its id: change ids, their triage and the gate's place carry
over, so the nightly loop goes on in the new store where it left off. The copy is one
transaction (the new store holds all of it or nothing), reads the old store as one
snapshot, and counts every table on both sides before it commits. The destination must be
new or empty: a copy never merges two histories. The old store is only read.

A team moving to PostgreSQL: copy, then set OPX_HISTORY_DSN (the workflow) or
OPX_HISTORY / --db to the new store (docs/history.md).`,
		Example: `  opx history copy --from opx-history.db --to postgres://opx@db:5432/opx
  opx history copy --from postgres://opx@db:5432/opx --to backup.db`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runHistoryCopy(c.Context(), env, o, args)
		},
	}
	c.Flags().StringVar(&o.from, "from", "", "the store to copy: a SQLite file or postgres:// URL")
	c.Flags().StringVar(&o.to, "to", "", "the new store: a SQLite file that does not exist yet, or an empty PostgreSQL database")
	addDBTimeout(c.Flags(), &o.dbTimeout)
	return c
}

func runHistoryCopy(ctx context.Context, env Env, o *historyCopyOptions, args []string) error {
	if o.from == "" || o.to == "" {
		return &UsageError{fmt.Errorf("copy needs both --from STORE and --to STORE")}
	}
	if history.DSN(o.from) == history.DSN(o.to) {
		return &UsageError{fmt.Errorf("--to names the store --from names: copy into a new store")}
	}
	if err := notTheStore("--to", o.to, o.from); err != nil {
		return err
	}
	src, err := openReader(ctx, o.from, o.dbTimeout)
	if err != nil {
		return err
	}
	defer src.Close()
	made := ""
	if files := history.Files(o.to); len(files) > 0 {
		if _, err := os.Lstat(files[0]); os.IsNotExist(err) {
			made = files[0] // this copy makes it: a copy that fails leaves no store behind
		}
	}
	dst, err := openStore(ctx, o.to, true, o.dbTimeout)
	if err != nil {
		return err
	}
	n, err := history.Copy(ctx, src, dst)
	dst.Close()
	if err != nil {
		if made != "" {
			for _, f := range history.Files(o.to) {
				os.Remove(f)
			}
		}
		return err
	}
	fmt.Fprintf(env.Stderr, "opx history copy: %s → %s: %s (every table counted on both sides)\n", safe.Text(src.Where), safe.Text(dst.Where), n)
	return nil
}
