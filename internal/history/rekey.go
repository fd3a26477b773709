// Revision 2: local series re-keyed by the machine that measured them (local@HOST).

package history

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/semianalysis/opx/internal/results"
)

// rekeyLocal is revision 2: the series an opx of before local@HOST keyed by cluster
// "local" are re-keyed by their machine, as a run added now keys them (point.testbed) —
// each point moves to the series of the node that measured it (a series of its own, or
// the one a newer opx already started), its confirmations with it, and the triage of its
// changes to their new ids — so no series splits at an upgrade. Points of no recorded node
// stay where they were.
func rekeyLocal(ctx context.Context, s *Store, tx *sql.Tx) error {
	type old struct {
		id                                  int64
		key, testlist, op, args, backend, m string
		ws, lower                           int
	}
	rows, err := tx.QueryContext(ctx, s.q("SELECT id, key, testlist, op, args, backend, world_size, metric, lower_is_better FROM series WHERE cluster = ?"), LocalRunner)
	if err != nil {
		return err
	}
	var olds []old
	for rows.Next() {
		var o old
		if err := rows.Scan(&o.id, &o.key, &o.testlist, &o.op, &o.args, &o.backend, &o.ws, &o.m, &o.lower); err != nil {
			rows.Close()
			return err
		}
		olds = append(olds, o)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, o := range olds {
		nodes, err := textColumn(ctx, tx, s.q(`SELECT DISTINCT c.node FROM points p JOIN contexts c ON c.id = p.ctx WHERE p.series = ? AND c.node <> ''
			UNION SELECT DISTINCT c.node FROM confirmations f JOIN contexts c ON c.id = f.ctx WHERE f.series = ? AND c.node <> ''`), o.id, o.id)
		if err != nil {
			return err
		}
		for _, node := range nodes {
			cluster := LocalRunner + "@" + node
			key := results.CaseKey(o.testlist, o.op, o.args, o.backend, o.ws, cluster)
			var to int64
			err := tx.QueryRowContext(ctx, s.q("SELECT id FROM series WHERE key = ?"), key).Scan(&to)
			if isNoRows(err) {
				err = tx.QueryRowContext(ctx, s.q(`INSERT INTO series (key, testlist, op, args, backend, world_size, cluster, metric, lower_is_better)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), key, o.testlist, o.op, o.args, o.backend, o.ws, cluster, o.m, o.lower).Scan(&to)
			}
			if err != nil {
				return err
			}
			// the triage of the changes these points may start, under the ids they have now
			runs, err := pairs(ctx, tx, s.q(`SELECT DISTINCT r.run_id, r.origin FROM points p JOIN runs r ON r.id = p.run JOIN contexts c ON c.id = p.ctx
				WHERE p.series = ? AND c.node = ?`), o.id, node)
			if err != nil {
				return err
			}
			for _, r := range runs {
				if _, err := tx.ExecContext(ctx, s.q("UPDATE triage SET change_id = ? WHERE change_id = ?"),
					ChangeID(key, o.m, r[0], r[1]), ChangeID(o.key, o.m, r[0], r[1])); err != nil {
					return err
				}
			}
			for _, table := range []string{"points", "confirmations"} {
				if _, err := tx.ExecContext(ctx, s.q("UPDATE "+table+" SET series = ? WHERE series = ? AND ctx IN (SELECT id FROM contexts WHERE node = ?)"), to, o.id, node); err != nil {
					return fmt.Errorf("moving the %s of %s to %s: %w", table, o.key, key, err)
				}
			}
		}
		var left int
		if err := tx.QueryRowContext(ctx, s.q("SELECT (SELECT COUNT(*) FROM points WHERE series = ?) + (SELECT COUNT(*) FROM confirmations WHERE series = ?)"), o.id, o.id).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			if _, err := tx.ExecContext(ctx, s.q("DELETE FROM series WHERE id = ?"), o.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// textColumn is a query's one text column.
func textColumn(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// pairs are a query's two text columns.
func pairs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([][2]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		out = append(out, [2]string{a, b})
	}
	return out, rows.Err()
}
