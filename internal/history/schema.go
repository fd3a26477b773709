// The store's schema: its versioned migrations and the additive revisions beside them,
// and the open that brings a writer's store to them (a reader never migrates).

package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// migrations are the schema's versions: migrations[i] takes a store from version i to i+1.
// Times are Unix seconds; a point's GPU time is in milliseconds (an integer: a few bytes).
var migrations = [][]string{{
	`CREATE TABLE opx_history (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE runs (
		id {id}, run_id TEXT NOT NULL, attempt INTEGER NOT NULL, origin TEXT NOT NULL, at BIGINT NOT NULL,
		source_sha TEXT NOT NULL, opx_version TEXT NOT NULL, dir TEXT NOT NULL, added_at BIGINT NOT NULL,
		confirms BIGINT, cases INTEGER NOT NULL, measured INTEGER NOT NULL, UNIQUE (run_id, origin))`,
	`CREATE TABLE series (
		id {id}, key TEXT NOT NULL UNIQUE, testlist TEXT NOT NULL, op TEXT NOT NULL, args TEXT NOT NULL,
		backend TEXT NOT NULL, world_size INTEGER NOT NULL, cluster TEXT NOT NULL, metric TEXT NOT NULL,
		lower_is_better INTEGER NOT NULL)`,
	`CREATE TABLE contexts (
		id {id}, digest TEXT NOT NULL UNIQUE, node TEXT NOT NULL, gpu TEXT NOT NULL, driver TEXT NOT NULL,
		image_digest TEXT NOT NULL, sm_clock TEXT NOT NULL, throttle TEXT NOT NULL)`,
	`CREATE TABLE cells (id {id}, digest TEXT NOT NULL UNIQUE, body {blob} NOT NULL)`,
	`CREATE TABLE points (
		series BIGINT NOT NULL, at BIGINT NOT NULL, run BIGINT NOT NULL, outcome SMALLINT NOT NULL,
		value {real}, lo {real}, hi {real}, n INTEGER, gpu_ms BIGINT, ctx BIGINT NOT NULL, cell BIGINT NOT NULL,
		PRIMARY KEY (series, at, run)){norowid}`,
	`CREATE INDEX points_run ON points (run, series)`,
	// a confirmation run's points: not in their series' time, but set against the suspect
	// (the run it confirms) by check
	`CREATE TABLE confirmations (
		series BIGINT NOT NULL, run BIGINT NOT NULL, suspect_run BIGINT NOT NULL, outcome SMALLINT NOT NULL, value {real},
		ctx BIGINT NOT NULL, PRIMARY KEY (series, run))`,
}, {
	// 2: triage events, the one thing opx serve writes: who moved a change (ChangeID) from
	// which state to which, when, from where, with a note and a link
	`CREATE TABLE triage (
		id {id}, change_id TEXT NOT NULL, at BIGINT NOT NULL, who TEXT NOT NULL, via TEXT NOT NULL,
		from_state TEXT NOT NULL, to_state TEXT NOT NULL, note TEXT NOT NULL, link TEXT NOT NULL)`,
	`CREATE INDEX triage_change ON triage (change_id, id)`,
	// the same case on other clusters (opx serve's series page)
	`CREATE INDEX series_case ON series (args, op, backend, world_size, metric, testlist)`,
}, {
	// 3: each run's cases by backend and outcome and its GPU time, counted when it is
	// added (runTally; a run added before has none, and is counted from its points)
	`ALTER TABLE runs ADD COLUMN tally TEXT`,
}}

// revisions are the changes beyond Schema that an older opx can ignore: revisions[i]
// takes a store from revision i to i+1 (opx_history.revision; none recorded is 0) — its
// statements, then its function. An older opx's rows written after get the new columns'
// defaults.
var revisions = []struct {
	stmts []string
	fn    func(context.Context, *Store, *sql.Tx) error
}{{
	// 1: what contended with a point's measurement (another opx run on its machine, a busy
	// machine), with where it was measured; '' when nothing did (an older opx's contexts)
	stmts: []string{`ALTER TABLE contexts ADD COLUMN contended TEXT NOT NULL DEFAULT ''`},
}, {
	// 2: local series keyed by their machine (local@HOST), as runs added since are
	fn: rekeyLocal,
}, {
	// 3: what kind of machine measured (GPU model, max SM clock and power limit; a CPU's
	// model, cores, memory and flags): '' in an older opx's contexts (check derives one
	// from the GPU model and clock)
	stmts: []string{`ALTER TABLE contexts ADD COLUMN kind TEXT NOT NULL DEFAULT ''`},
}, {
	// 4: the check of the newest run that add keeps for opx serve (kept.go): the store's
	// state it is of, which opx made it, when, and its body (gzipped JSON); an older
	// opx's add leaves it as it is, of a state the store no longer has
	stmts: []string{`CREATE TABLE checks (state TEXT PRIMARY KEY, made_by TEXT NOT NULL, made_at BIGINT NOT NULL, body {blob} NOT NULL)`},
}, {
	// 5: what opx history notify told each webhook (by a digest of its URL, never the URL):
	// an alert group's id and its changes' ids, so that a group is announced once
	stmts: []string{`CREATE TABLE notices (target TEXT NOT NULL, what TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (target, what))`},
}}

// migrate brings the store to Schema. An empty database is created; one with tables but
// no opx_history table is someone else's and is left alone; a newer schema is refused.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.opening(err)
	}
	defer tx.Rollback()
	if s.pg {
		if current, err := s.current(ctx, tx); err != nil || current {
			if err != nil {
				return err
			}
			s.From, s.rev = [2]int{Schema, Revision}, Revision
			return tx.Commit() // nothing to migrate: no lock taken (a reader never waits on one)
		}
		// parallel first adds: one creates the schema, the others then see it
		if err := s.lockPG(ctx, tx, 7243001, "creating the schema"); err != nil {
			return err
		}
	}
	tables, err := s.tables(ctx, tx)
	if err != nil {
		return s.opening(err)
	}
	version := 0
	if tables["opx_history"] {
		var v string
		if err := tx.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = 'schema'")).Scan(&v); isNoRows(err) {
			return fmt.Errorf("%s is not an opx history store: it has no schema version", s.Where)
		} else if err != nil {
			return s.opening(err)
		}
		if version, err = strconv.Atoi(v); err != nil || version < 1 {
			return fmt.Errorf("%s is not an opx history store: its schema version is %q", s.Where, v)
		}
	} else if len(tables) > 0 {
		return fmt.Errorf("%s is not an opx history store: it holds other tables (left untouched)", s.Where)
	}
	if version > Schema {
		return fmt.Errorf("%s was written by a newer opx (history schema %d; this opx knows up to %d): upgrade opx", s.Where, version, Schema)
	}
	s.From[0] = version
	up := "INSERT INTO opx_history (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
	if version < Schema {
		for v := version; v < Schema; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.ExecContext(ctx, s.q(stmt)); err != nil {
					return fmt.Errorf("%s: migrating to history schema %d: %w", s.Where, v+1, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(up), "schema", strconv.Itoa(Schema)); err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
	}
	rev, err := s.revision(ctx, tx)
	if err != nil {
		return err
	}
	s.From[1], s.rev = rev, max(rev, Revision)
	if rev >= Revision {
		return tx.Commit() // current, or revised further by a newer opx: read and written as it is
	}
	for r := rev; r < Revision; r++ {
		for _, stmt := range revisions[r].stmts {
			if _, err := tx.ExecContext(ctx, s.q(stmt)); err != nil {
				return fmt.Errorf("%s: revising history schema %d to revision %d: %w", s.Where, Schema, r+1, err)
			}
		}
		if fn := revisions[r].fn; fn != nil {
			if err := fn(ctx, s, tx); err != nil {
				return fmt.Errorf("%s: revising history schema %d to revision %d: %w", s.Where, Schema, r+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(up), "revision", strconv.Itoa(Revision)); err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	return tx.Commit()
}

// revision is the store's additive revision (opx_history.revision; 0 when none is recorded).
func (s *Store) revision(ctx context.Context, tx *sql.Tx) (int, error) {
	var v string
	err := tx.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = 'revision'")).Scan(&v)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, s.opening(err)
	}
	r, err := strconv.Atoi(v)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("%s is not an opx history store: its revision is %q", s.Where, v)
	}
	return r, nil
}

// current is whether the PostgreSQL store already has this opx's schema.
func (s *Store) current(ctx context.Context, tx *sql.Tx) (bool, error) {
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT to_regclass('opx_history') IS NOT NULL").Scan(&exists); err != nil || !exists {
		if err != nil {
			return false, s.opening(err)
		}
		return false, nil
	}
	var v string
	err := tx.QueryRowContext(ctx, "SELECT value FROM opx_history WHERE name = 'schema'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.opening(err)
	}
	if v != strconv.Itoa(Schema) {
		return false, nil
	}
	r, err := s.revision(ctx, tx)
	return err == nil && r >= Revision, err
}

// tables are the user tables in the database.
func (s *Store) tables(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	query := "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
	if s.pg {
		query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}
