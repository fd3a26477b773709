// opx history: the parent of the history commands, and the store flags and opening every
// history and serve command shares (addStoreFlags, openStore, openReader).

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/semianalysis/opx/internal/files"
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
	c.AddCommand(newHistoryAddCmd(env), newHistoryCheckCmd(env), newHistoryReportCmd(env), newHistoryTriageCmd(env), newHistoryCopyCmd(env), newHistoryMigrateCmd(env), newHistoryNotifyCmd(env))
	return c
}

// notTheStore refuses an output of a history command that is the store or one of its
// journals (a usage error, before the store is opened).
func notTheStore(flag, out, db string) error {
	if err := files.NotOneOf(flag, out, "the history store", history.Files(history.DSN(db))...); err != nil {
		return &UsageError{err}
	}
	return nil
}

// openStore opens the store --db names (history.DSN) to write it (history.Open: add,
// triage, migrate), or, reader, only to read it (history.OpenReader: check, report, serve,
// a copy's source), never migrating it; a URL of a scheme opx keeps no store in is a
// usage error.
func openStore(ctx context.Context, db string, create bool, timeout time.Duration) (*history.Store, error) {
	return openStoreAs(ctx, db, create, false, timeout)
}

// openReader is openStore for a command that only reads the store.
func openReader(ctx context.Context, db string, timeout time.Duration) (*history.Store, error) {
	return openStoreAs(ctx, db, false, true, timeout)
}

func openStoreAs(ctx context.Context, db string, create, reader bool, timeout time.Duration) (*history.Store, error) {
	if err := checkDBTimeout(timeout); err != nil {
		return nil, err
	}
	open := func() (*history.Store, error) { return history.Open(ctx, history.DSN(db), create, timeout) }
	if reader {
		open = func() (*history.Store, error) { return history.OpenReader(ctx, history.DSN(db), timeout) }
	}
	s, err := open()
	var bad *history.ErrDSN
	if errors.As(err, &bad) {
		return nil, &UsageError{err}
	}
	return s, err
}

// checkDBTimeout refuses a --db-timeout that would not let a command wait at all.
func checkDBTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return &UsageError{fmt.Errorf("--db-timeout %s: give a positive time to wait on the store (30s)", timeout)}
	}
	return nil
}

// addStoreFlags declares --db and --db-timeout as every command over a history store has
// them: one name, default and help for each.
// storeFlags are --db and --db-timeout, declared once for every command that opens one
// history store (add, check, report, triage, migrate, serve: restic's AddFlags shape);
// the store is opened by its methods.
type storeFlags struct {
	db        string
	dbTimeout time.Duration
}

// AddFlags declares the flags on f.
func (s *storeFlags) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&s.db, "db", "", "the store: a SQLite file or postgres:// URL (default $OPX_HISTORY, else opx-history.db)")
	addDBTimeout(f, &s.dbTimeout)
}

// open opens the store to write it (openStore); create makes it when it does not exist.
func (s *storeFlags) open(ctx context.Context, create bool) (*history.Store, error) {
	return openStore(ctx, s.db, create, s.dbTimeout)
}

// reader opens the store only to read it (openReader).
func (s *storeFlags) reader(ctx context.Context) (*history.Store, error) {
	return openReader(ctx, s.db, s.dbTimeout)
}

// addDBTimeout declares --db-timeout (history copy has it for both of its stores).
func addDBTimeout(f *pflag.FlagSet, timeout *time.Duration) {
	f.DurationVar(timeout, "db-timeout", history.DefaultTimeout, "wait at most this long on the store (each, for a copy): another writer's lock, a server that stops answering")
}
