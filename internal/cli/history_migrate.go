// opx history migrate: bring a store to this opx's schema and revision, and say so.

package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/safe"
)

type historyMigrateOptions struct {
	storeFlags
}

func newHistoryMigrateCmd(env Env) *cobra.Command {
	o := &historyMigrateOptions{}
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Bring a store written by an older opx to this opx's schema",
		Long: `Bring the store to this opx's history schema and revision, in one transaction. Readers
(check, report, serve) never change a store: a store of an older schema is refused by them
until a writer (this, or the next opx history add) brings it forward. A revision (a column
an older opx can ignore) leaves the schema's number as it is, so an older opx of the same
schema goes on writing the store; a new schema locks older writers out ("upgrade opx").`,
		Example: `  opx history migrate --db opx-history.db`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runHistoryMigrate(c.Context(), env, o)
		},
	}
	o.AddFlags(c.Flags())
	return c
}

func runHistoryMigrate(ctx context.Context, env Env, o *historyMigrateOptions) error {
	s, err := o.open(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	now := fmt.Sprintf("history schema %d, revision %d", history.Schema, history.Revision)
	if s.From == [2]int{history.Schema, history.Revision} {
		fmt.Fprintf(env.Stderr, "opx history migrate: %s: already at %s: nothing to do\n", safe.Text(s.Where), now)
		return nil
	}
	fmt.Fprintf(env.Stderr, "opx history migrate: %s: %s (was schema %d, revision %d)\n", safe.Text(s.Where), now, s.From[0], s.From[1])
	return nil
}
