// The store's reads for check: the runs, their sources, the contexts, the series to judge
// (those a judged run touched, or all; filtered) and a bounded window of each.

package history

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/verdict"
)

// runs are the store's runs, newest first (confirmation runs are not in a series' time).
func (s *Store) runs(ctx context.Context) ([]RunRef, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, run_id, at, origin FROM runs WHERE confirms IS NULL ORDER BY at DESC, id DESC")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	var out []RunRef
	for rows.Next() {
		var r RunRef
		var at int64
		if err := rows.Scan(&r.id, &r.RunID, &at, &r.origin); err != nil {
			return nil, err
		}
		r.At = time.Unix(at, 0).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

type runMeta struct{ sourceSHA, opxVersion string }

// provenanceOf is what a change's provenance is read from: every context and every run's
// source SHA and opx version (check and a series' page both say what changed under a shift).
func (s *Store) provenanceOf(ctx context.Context) (map[int64]context_, map[int64]runMeta, error) {
	ctxs, err := s.contexts(ctx)
	if err != nil {
		return nil, nil, err
	}
	meta, err := s.runMeta(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ctxs, meta, nil
}

func (s *Store) runMeta(ctx context.Context) (map[int64]runMeta, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, source_sha, opx_version FROM runs")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	out := map[int64]runMeta{}
	for rows.Next() {
		var id int64
		var m runMeta
		if err := rows.Scan(&id, &m.sourceSHA, &m.opxVersion); err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, rows.Err()
}

func (s *Store) contexts(ctx context.Context) (map[int64]context_, error) {
	contended, kind := "contended", "kind"
	if s.rev < 1 { // a store of before revision 1, read as it is: every context quiet
		contended = "''"
	}
	if s.rev < 3 { // before revision 3: no kind recorded (kind() derives one)
		kind = "''"
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, node, gpu, driver, image_digest, sm_clock, throttle, "+contended+", "+kind+" FROM contexts")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	out := map[int64]context_{}
	for rows.Next() {
		var id int64
		var c context_
		if err := rows.Scan(&id, &c.Node, &c.GPU, &c.Driver, &c.ImageDigest, &c.SMClock, &c.Throttle, &c.Contended, &c.Kind); err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, rows.Err()
}

// seriesToCheck are the series the newest run touched (or all), filtered.
func (s *Store) seriesToCheck(ctx context.Context, o CheckOptions, gated map[int64]bool) ([]*seriesRow, error) {
	query := "SELECT id, key, testlist, op, args, backend, world_size, cluster, metric, lower_is_better FROM series"
	var args []any
	if !o.All {
		ids := slices.Sorted(maps.Keys(gated))
		query += " WHERE id IN (SELECT series FROM points WHERE run IN (" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + "))"
		for _, id := range ids {
			args = append(args, id)
		}
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+" ORDER BY id"), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	var out []*seriesRow
	for rows.Next() {
		se := &seriesRow{}
		var lower int
		if err := rows.Scan(&se.id, &se.key, &se.testlist, &se.op, &se.args, &se.backend, &se.ws, &se.cluster, &se.metric, &lower); err != nil {
			return nil, err
		}
		se.lower = lower == 1
		if keeps(o.Filter, se) {
			out = append(out, se)
		}
	}
	return out, rows.Err()
}

// filterValues are the values each field the filter names has in the store (at most 20
// of each): what a filter that matched nothing could have said.
func (s *Store) filterValues(ctx context.Context, o CheckOptions) (map[string][]string, error) {
	out := map[string][]string{}
	for k := range o.Filter {
		if !slices.Contains(FilterFields, k) {
			continue
		}
		rows, err := s.db.QueryContext(ctx, "SELECT DISTINCT "+k+" FROM series ORDER BY "+k+" LIMIT 21")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Where, err)
		}
		vs := []string{}
		for rows.Next() {
			var v any
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, err
			}
			vs = append(vs, fmt.Sprint(v))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out[k] = vs
	}
	return out, nil
}

// FilterFields are the series fields --filter takes.
var FilterFields = []string{"testlist", "op", "args", "backend", "world_size", "cluster"}

func keeps(f map[string]string, se *seriesRow) bool {
	for k, v := range f {
		var have string
		switch k {
		case "testlist":
			have = se.testlist
		case "op":
			have = se.op
		case "args":
			have = se.args
		case "backend":
			have = se.backend
		case "world_size":
			have = strconv.Itoa(se.ws)
		case "cluster":
			have = se.cluster
		}
		if have != v {
			return false
		}
	}
	return true
}

// A batch of series whose windows are read (err: why not).
type batchRead struct {
	part []*seriesRow
	err  error
}

// windows reads the series' windows a batch at a time (checkBatch), each batch read while
// the one before it is judged (the store's reads are one at a time, the judging is on every
// core: together they take about the longer of the two, not their sum). The channel is
// unbuffered: two batches are held at once, the one judged and the one read (a buffer of
// one would hold three, and is no faster). When ctx ends the reading stops and the channel
// closes early: the caller checks ctx after it. stop ends the reading and waits for it (the
// caller defers it).
func (s *Store) windows(ctx context.Context, series []*seriesRow, lookback int) (<-chan batchRead, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan batchRead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		batch := checkBatch(lookback)
		for start := 0; start < len(series); start += batch {
			part := series[start:min(len(series), start+batch)]
			err := s.window(ctx, part, lookback)
			select {
			case out <- batchRead{part, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// window reads each series' newest lookback points (oldest first): an index range per
// series, never its whole history.
func (s *Store) window(ctx context.Context, series []*seriesRow, lookback int) error {
	const cols = "at, run, outcome, value, lo, hi, ctx, cell"
	scan := func(rows *sql.Rows, into func(id int64) *seriesRow, withID bool) error {
		defer rows.Close()
		for rows.Next() {
			var p stored
			var id int64
			var outcome int
			dest := []any{&p.at, &p.run, &outcome, &p.value, &p.lo, &p.hi, &p.ctx, &p.cell}
			if withID {
				dest = append([]any{&id}, dest...)
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			p.outcome = verdict.Outcome(outcome)
			se := into(id)
			se.points = append(se.points, p)
		}
		return rows.Err()
	}
	if s.pg {
		byID := map[int64]*seriesRow{}
		for _, se := range series {
			byID[se.id] = se
		}
		for start := 0; start < len(series); start += 5000 {
			ids := make([]int64, 0, 5000)
			for _, se := range series[start:min(len(series), start+5000)] {
				ids = append(ids, se.id)
			}
			rows, err := s.db.QueryContext(ctx, `SELECT s.id, `+cols+` FROM unnest($1::bigint[]) AS s(id)
				CROSS JOIN LATERAL (SELECT `+cols+` FROM points WHERE series = s.id ORDER BY at DESC, run DESC LIMIT $2) p`, ids, lookback)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Where, err)
			}
			if err := scan(rows, func(id int64) *seriesRow { return byID[id] }, true); err != nil {
				return err
			}
		}
	} else {
		stmt, err := s.db.PrepareContext(ctx, "SELECT "+cols+" FROM points WHERE series = ? ORDER BY at DESC, run DESC LIMIT ?")
		if err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
		defer stmt.Close()
		for _, se := range series {
			rows, err := stmt.QueryContext(ctx, se.id, lookback)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Where, err)
			}
			if err := scan(rows, func(int64) *seriesRow { return se }, false); err != nil {
				return err
			}
		}
	}
	for _, se := range series {
		slices.Reverse(se.points)
	}
	return nil
}
