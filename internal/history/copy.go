// Moving a store whole (opx history copy): every table, keyset-paged from a snapshot of the
// source, into a new or empty destination in one transaction, counted on both sides.

package history

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// copied are the store's tables in the order a copy writes them, each with its key (the
// order a copy reads it in, a page at a time) and whether its key is an id that later
// writes number from.
var copied = []struct {
	table string
	key   []string
	ids   bool
}{
	{"series", []string{"id"}, true},
	{"contexts", []string{"id"}, true},
	{"cells", []string{"id"}, true},
	{"runs", []string{"id"}, true},
	{"points", []string{"series", "at", "run"}, false},
	{"confirmations", []string{"series", "run"}, false},
	{"triage", []string{"id"}, true},
	{"opx_history", []string{"name"}, false}, // the gate's records; the schema's version is the destination's own
}

// Copied is what Copy wrote: each table's rows, as counted in both stores.
type Copied struct {
	Rows map[string]int64
}

// Runs, Points, … are the counts a user asks about.
func (c Copied) String() string {
	return fmt.Sprintf("%d runs, %d series, %d points, %d confirmation points, %d triage events",
		c.Rows["runs"], c.Rows["series"], c.Rows["points"], c.Rows["confirmations"], c.Rows["triage"])
}

// Copy writes every row of the store from into the store to — runs, series, contexts,
// cells, points, confirmations, triage events and the gate's records, each with its id,
// so change ids, triage and the gate's place carry over — in one transaction: to holds all
// of it or none. to must hold no run and no triage event (a copy never merges two
// histories). from is read as one snapshot; every table's rows are then counted on both
// sides before the copy commits, and a difference fails it.
func Copy(ctx context.Context, from, to *Store) (Copied, error) {
	src, done, err := from.snapshot(ctx)
	if err != nil {
		return Copied{}, fmt.Errorf("%s: %w", from.Where, err)
	}
	defer done()
	dst, err := to.db.BeginTx(ctx, nil)
	if err != nil {
		return Copied{}, fmt.Errorf("%s: %w", to.Where, err)
	}
	defer dst.Rollback()
	if to.pg {
		// the lock every add and triage takes: nothing else writes while the copy does
		for _, key := range []int64{7243002, 7243003} {
			if err := to.lockPG(ctx, dst, key, "copying a store into it"); err != nil {
				return Copied{}, err
			}
		}
	}
	var held int64
	if err := dst.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM runs) + (SELECT COUNT(*) FROM triage) + (SELECT COUNT(*) FROM series)").Scan(&held); err != nil {
		return Copied{}, fmt.Errorf("%s: %w", to.Where, err)
	}
	if held > 0 {
		return Copied{}, fmt.Errorf("%s already holds a history: opx history copy writes only into an empty store (it never merges two); give a new file or an empty database", to.Where)
	}
	out := Copied{Rows: map[string]int64{}}
	for _, t := range copied {
		n, err := copyTable(ctx, from, src, to, dst, t.table, t.key)
		if err != nil {
			return Copied{}, err
		}
		var there int64
		if err := dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.table+skipSchema(t.table)).Scan(&there); err != nil {
			return Copied{}, fmt.Errorf("%s: %w", to.Where, err)
		}
		var here int64
		if err := src.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.table+skipSchema(t.table)).Scan(&here); err != nil {
			return Copied{}, fmt.Errorf("%s: %w", from.Where, err)
		}
		if here != n || there != n {
			return Copied{}, fmt.Errorf("copying %s: %s holds %d rows, %d were read and %s holds %d: nothing copied", t.table, from.Where, here, n, to.Where, there)
		}
		out.Rows[t.table] = n
		if t.ids && to.pg && n > 0 {
			// the identity numbers on after the copied ids
			if _, err := dst.ExecContext(ctx, fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', 'id'), (SELECT MAX(id) FROM %s))", t.table, t.table)); err != nil {
				return Copied{}, fmt.Errorf("%s: %w", to.Where, err)
			}
		}
	}
	if err := dst.Commit(); err != nil {
		return Copied{}, fmt.Errorf("%s: %w", to.Where, err)
	}
	return out, nil
}

// skipSchema leaves the schema's version and revision out of opx_history: each store
// keeps its own.
func skipSchema(table string) string {
	if table == "opx_history" {
		return " WHERE name NOT IN ('schema', 'revision')"
	}
	return ""
}

// copyTable copies every row of table, a page at a time in key order (each statement is
// short: a server's statement timeout never ends a copy of a large store), and says how
// many it copied.
func copyTable(ctx context.Context, from *Store, src queryer, to *Store, dst *sql.Tx, table string, key []string) (int64, error) {
	const page = 5000
	rows, err := src.QueryContext(ctx, "SELECT * FROM "+table+" LIMIT 0")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", from.Where, err)
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", from.Where, err)
	}
	at := make([]int, len(key)) // the key's columns among cols
	for i, k := range key {
		at[i] = -1
		for j, c := range cols {
			if c == k {
				at[i] = j
			}
		}
		if at[i] < 0 {
			return 0, fmt.Errorf("%s: table %s has no column %s: not a store this opx can copy", from.Where, table, k)
		}
	}
	list := strings.Join(cols, ", ")
	keys := strings.Join(key, ", ")
	after := "(" + keys + ") > (" + strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ") + ")"
	where := skipSchema(table)
	var last []any
	var n int64
	for {
		query := "SELECT " + list + " FROM " + table + where
		if last != nil {
			query += map[bool]string{true: " AND ", false: " WHERE "}[where != ""] + after
		}
		query += " ORDER BY " + keys + fmt.Sprintf(" LIMIT %d", page)
		got, err := readPage(ctx, src, from.q(query), last, len(cols))
		if err != nil {
			return 0, fmt.Errorf("%s: reading %s: %w", from.Where, table, err)
		}
		if len(got) == 0 {
			return n, nil
		}
		err = to.insertMany(ctx, dst, table+" ("+list+")", len(cols), len(got), func(i int, args []any) { copy(args, got[i]) })
		if err != nil {
			return 0, fmt.Errorf("copying %s: %w", table, err)
		}
		n += int64(len(got))
		lastRow := got[len(got)-1]
		last = make([]any, len(key))
		for i, j := range at {
			last[i] = lastRow[j]
		}
		if len(got) < page {
			return n, nil
		}
	}
}

// readPage is one page of rows, each its columns' values as the driver gives them.
func readPage(ctx context.Context, tx queryer, query string, args []any, ncols int) ([][]any, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, ncols)
		ptrs := make([]any, ncols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// queryer is what a snapshot reads with: a transaction, or a connection inside one.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// snapshot is a read of the whole store as of one moment that takes no write lock: a
// read-only REPEATABLE READ transaction on PostgreSQL; on SQLite a deferred transaction
// (its first read fixes what it sees; a writer meanwhile goes on in the WAL), begun by
// hand on the store's one connection, whose transactions otherwise begin IMMEDIATE (a
// writer's).
func (s *Store) snapshot(ctx context.Context) (queryer, func(), error) {
	if s.pg {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return nil, nil, err
		}
		return tx, func() { tx.Rollback() }, nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, func() {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		conn.Close()
	}, nil
}
