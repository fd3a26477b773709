// Writing a run into the store: one transaction, its series, contexts and cells deduped,
// its points inserted in batches, a run of the same id and origin replaced whole.

package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/verdict"
)

// write stores a read run in one transaction: the run, its new series, contexts and
// cells, then its points. Parallel adds serialize (SQLite's write lock, PostgreSQL's
// advisory lock); a run already there (same run id, same time measured) writes nothing.
func (s *Store) write(ctx context.Context, dir string, rec *recorded) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	defer tx.Rollback()
	if s.pg {
		if err := s.lockPG(ctx, tx, 7243002, "adding "+rec.runID); err != nil {
			return err
		}
	}
	if err := s.replaceSame(ctx, tx, rec); err != nil {
		return err
	}
	confirms, err := s.suspectRun(ctx, tx, dir, rec)
	if err != nil {
		return err
	}
	var runRow int64
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO runs (run_id, attempt, origin, at, source_sha, opx_version, dir, added_at, confirms, cases, measured, tally)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), rec.runID, rec.attempt, rec.origin, rec.at.Unix(), rec.sourceSHA,
		rec.opxVersion, dir, time.Now().Unix(), confirms, len(rec.points), rec.measured, rec.tally()).Scan(&runRow)
	if err != nil {
		return fmt.Errorf("%s: recording the run: %w", s.Where, err)
	}
	series, err := s.seriesIDs(ctx, tx, rec.points)
	if err != nil {
		return err
	}
	ctxs, err := s.contextIDs(ctx, tx, rec.points)
	if err != nil {
		return err
	}
	if confirms != nil { // set against the suspects, not in the series' time
		err = s.insertMany(ctx, tx, "confirmations (series, run, suspect_run, outcome, value, ctx)", 6, len(rec.points), func(i int, a []any) {
			p := &rec.points[i]
			a[0], a[1], a[2], a[3], a[4], a[5] = series[p.key], runRow, confirms, int(p.outcome), nil, ctxs[p.ctx.digest()]
			if p.outcome == verdict.Measured {
				a[4] = p.value
			}
		})
		if err != nil {
			return err
		}
		return tx.Commit()
	}
	cells, err := s.cellIDs(ctx, tx, rec.cells)
	if err != nil {
		return err
	}
	err = s.insertMany(ctx, tx, "points (series, at, run, outcome, value, lo, hi, n, gpu_ms, ctx, cell)", 11, len(rec.points), func(i int, args []any) {
		p := &rec.points[i]
		args[0], args[1], args[2], args[3] = series[p.key], rec.at.Unix(), runRow, int(p.outcome)
		args[4], args[5], args[6], args[7] = nil, nil, nil, nil
		if p.outcome == verdict.Measured {
			args[4] = p.value
			if p.spread {
				args[5], args[6] = p.lo, p.hi
			}
			if p.n > 0 {
				args[7] = p.n
			}
		}
		args[8] = nil
		if p.gpuSeconds > 0 {
			args[8] = int64(math.Round(p.gpuSeconds * 1000))
		}
		args[9], args[10] = ctxs[p.ctx.digest()], cells[p.cell]
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// replaceSame looks for the same run (run id and first allocation) in the store: added
// again unchanged, there is nothing to write (errAlready); resumed since (a newer attempt,
// other outcomes), its points are deleted, to be replaced.
func (s *Store) replaceSame(ctx context.Context, tx *sql.Tx, rec *recorded) error {
	var old struct {
		id, at                   int64
		attempt, cases, measured int
	}
	err := tx.QueryRowContext(ctx, s.q("SELECT id, at, attempt, cases, measured FROM runs WHERE run_id = ? AND origin = ?"), rec.runID, rec.origin).
		Scan(&old.id, &old.at, &old.attempt, &old.cases, &old.measured)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("%s: %w", s.Where, err)
	case old.attempt == rec.attempt && old.cases == len(rec.points) && old.measured == rec.measured:
		rec.at = time.Unix(old.at, 0).UTC() // said as the store holds it, whatever --at said this time
		return errAlready
	default:
		for _, del := range []string{"DELETE FROM points WHERE run = ?", "DELETE FROM confirmations WHERE run = ?", "DELETE FROM runs WHERE id = ?"} {
			if _, err := tx.ExecContext(ctx, s.q(del), old.id); err != nil {
				return fmt.Errorf("%s: replacing run %s: %w", s.Where, rec.runID, err)
			}
		}
		rec.replaced = &Replaced{Attempt: old.attempt, Cases: old.cases, Measured: old.measured}
	}
	return nil
}

// suspectRun is, for a confirmation run, the stored run whose suspects it confirms (nil
// for any other run); a suspect run the store does not hold is an error.
func (s *Store) suspectRun(ctx context.Context, tx *sql.Tx, dir string, rec *recorded) (any, error) {
	c := rec.confirms
	if c == nil {
		return nil, nil
	}
	var suspect int64
	err := tx.QueryRowContext(ctx, s.q("SELECT id FROM runs WHERE run_id = ? AND origin = ? AND confirms IS NULL"), c.RunID, c.Origin).Scan(&suspect)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s confirms run %s of %s, which %s does not hold (was the confirmation manifest made from another store?)",
			dir, c.RunID, c.At.UTC().Format(time.RFC3339), s.Where)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	return suspect, nil
}

// insertMany inserts n rows of cols columns, many to a statement.
func (s *Store) insertMany(ctx context.Context, tx *sql.Tx, into string, cols, n int, row func(i int, args []any)) error {
	const per = 500
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	var stmt *sql.Stmt
	stmtRows := 0
	args := make([]any, 0, per*cols)
	for start := 0; start < n; start += per {
		k := min(per, n-start)
		if stmt == nil || stmtRows != k {
			if stmt != nil {
				stmt.Close()
			}
			var err error
			stmt, err = tx.PrepareContext(ctx, s.q("INSERT INTO "+into+" VALUES "+strings.TrimSuffix(strings.Repeat(one+", ", k), ", ")))
			if err != nil {
				return fmt.Errorf("%s: %w", s.Where, err)
			}
			stmtRows = k
		}
		args = args[:k*cols]
		for i := range k {
			row(start+i, args[i*cols:(i+1)*cols])
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			stmt.Close()
			return fmt.Errorf("%s: %w", s.Where, err)
		}
	}
	if stmt != nil {
		stmt.Close()
	}
	return nil
}

// seriesIDs are the store's ids of the points' series, new ones added.
func (s *Store) seriesIDs(ctx context.Context, tx *sql.Tx, points []point) (map[string]int64, error) {
	ids := map[string]int64{}
	noMetric := map[string]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT id, key, metric FROM series")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	for rows.Next() {
		var id int64
		var k, m string
		if err := rows.Scan(&id, &k, &m); err != nil {
			rows.Close()
			return nil, err
		}
		ids[k] = id
		if m == "" {
			noMetric[k] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var fresh []int
	seen := map[string]bool{}
	for i := range points {
		p := &points[i]
		if _, ok := ids[p.key]; !ok && !seen[p.key] {
			seen[p.key] = true
			fresh = append(fresh, i)
		}
	}
	err = s.insertMany(ctx, tx, "series (key, testlist, op, args, backend, world_size, cluster, metric, lower_is_better)", 9, len(fresh), func(i int, a []any) {
		p := &points[fresh[i]]
		a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8] = p.key, p.testlist, p.op, p.args, p.backend, p.ws, p.cluster, p.metric, boolInt(p.lower)
	})
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		return s.seriesIDs(ctx, tx, nil)
	}
	// a series first recorded unmeasured has no metric yet: it takes its first measured one
	for i := range points {
		p := &points[i]
		if p.metric == "" || !noMetric[p.key] {
			continue
		}
		noMetric[p.key] = false
		if _, err := tx.ExecContext(ctx, s.q("UPDATE series SET metric = ?, lower_is_better = ? WHERE id = ? AND metric = ''"), p.metric, boolInt(p.lower), ids[p.key]); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Where, err)
		}
	}
	return ids, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// contextIDs are the store's ids of the points' contexts, new ones added.
func (s *Store) contextIDs(ctx context.Context, tx *sql.Tx, points []point) (map[string]int64, error) {
	want := map[string]context_{}
	for i := range points {
		c := points[i].ctx
		want[c.digest()] = c
	}
	return dedupe(ctx, s, tx, "contexts", "(digest, node, gpu, driver, image_digest, sm_clock, throttle, contended, kind)", 9, want, func(d string, c context_, a []any) {
		a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8] = d, c.Node, c.GPU, c.Driver, c.ImageDigest, c.SMClock, c.Throttle, c.Contended, c.Kind
	})
}

// cellIDs are the store's ids of the run's cells, new ones added (their bodies made then).
func (s *Store) cellIDs(ctx context.Context, tx *sql.Tx, cells map[string]*pyjson.Object) (map[string]int64, error) {
	return dedupe(ctx, s, tx, "cells", "(digest, body)", 2, cells, func(k string, c *pyjson.Object, a []any) { a[0], a[1] = k, cellBody(c) })
}

// dedupe is the ids of rows keyed by digest in table, those not there yet inserted.
func dedupe[T any](ctx context.Context, s *Store, tx *sql.Tx, table, cols string, n int, want map[string]T, row func(string, T, []any)) (map[string]int64, error) {
	ids := map[string]int64{}
	lookup := func() error {
		rows, err := tx.QueryContext(ctx, "SELECT id, digest FROM "+table)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var d string
			if err := rows.Scan(&id, &d); err != nil {
				return err
			}
			if _, ok := want[d]; ok {
				ids[d] = id
			}
		}
		return rows.Err()
	}
	if err := lookup(); err != nil {
		return nil, err
	}
	var fresh []string
	for d := range want {
		if _, ok := ids[d]; !ok {
			fresh = append(fresh, d)
		}
	}
	if len(fresh) == 0 {
		return ids, nil
	}
	err := s.insertMany(ctx, tx, table+" "+cols, n, len(fresh), func(i int, a []any) { row(fresh[i], want[fresh[i]], a) })
	if err != nil {
		return nil, err
	}
	return ids, lookup()
}
