package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Added is what one add did.
type Added struct {
	Dir, RunID string
	At         time.Time
	Cases      int // cases recorded
	Measured   int // of which measured
	Extra      int // rows of no requested case: not recorded
	// Replaced is the run as the store held it, when a changed run (resumed: a newer
	// attempt, more measured) replaced it; nil otherwise.
	Replaced *Replaced
	Already  bool // the run was in the store: nothing was written
	// Confirms is the run a confirmation run re-measured suspects of ("" for a run of its own).
	Confirms string
	// Escaped names the texts (a few, with their field) that held a NUL byte or invalid
	// UTF-8, which the store keeps escaped (storable) on SQLite and PostgreSQL alike.
	Escaped []string
}

// Replaced is what the store held of a run that an add replaced.
type Replaced struct{ Attempt, Cases, Measured int }

// point is one case of one run, as the store keeps it.
type point struct {
	key, testlist, op, args, backend, cluster string
	ws                                        int
	metric                                    string
	lower                                     bool
	outcome                                   verdict.Outcome
	value, lo, hi                             float64
	spread                                    bool
	n                                         int
	gpuSeconds                                float64
	ctx                                       context_
	cell                                      string // the cell's digest (cells)
}

// context_ is where and on what a point was measured: what a change is tied to.
type context_ struct {
	Node, GPU, Driver, ImageDigest, SMClock, Throttle string
	// Kind is what kind of machine measured (machineKind; revision 3): what tells a
	// pool's machines apart. "" in a context of before it (kind derives one).
	Kind string
	// Contended is what contended with the measurement (results.Row.Contended): check
	// never opens a change on such points alone, and the gate asks for them again
	Contended string
}

// kind is what kind of machine the context is, as the detector tells a pool's machines
// apart (changes.Obs.Kind): its recorded Kind, else (a context of before revision 3) its
// GPU model and max SM clock; "" without either.
func (c context_) kind() string {
	switch {
	case c.Kind != "":
		return c.Kind
	case c.GPU == "":
		return ""
	case c.SMClock == "":
		return c.GPU
	}
	return c.GPU + " at " + c.SMClock
}

func (c context_) digest() string {
	parts := []string{c.Node, c.GPU, c.Driver, c.ImageDigest, c.SMClock, c.Throttle}
	if c.Contended != "" { // a quiet context keeps the digest it had before contention was kept
		parts = append(parts, c.Contended)
	}
	if c.Kind != "" { // and one of no kind the digest it had before kinds were kept
		parts = append(parts, "kind", c.Kind)
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:16])
}

// recorded is a run read for the store.
type recorded struct {
	runID, origin, sourceSHA, opxVersion string
	attempt                              int
	at                                   time.Time
	points                               []point
	cells                                map[string]*pyjson.Object // cellKey: the cell
	measured, extra                      int
	replaced                             *Replaced // the run as the store held it, when this add replaced it
	confirms                             *Confirms // set when the run is a confirmation (its manifest says which run)
}

// Confirms is what a confirmation manifest re-measures: the suspects of one run, each
// case with the nodes that measured it (which the cells exclude). It is the manifest's
// "confirms" member.
type Confirms struct {
	RunID string    `json:"run_id"`
	At    time.Time `json:"at"`
	// Origin is, with RunID, the run's identity in the store (two runs may share a second).
	Origin string          `json:"origin"`
	Cases  []ConfirmedCase `json:"cases"`
}

// ConfirmedCase is one suspect a confirmation manifest re-measures.
type ConfirmedCase struct {
	Key   string   `json:"key"`
	Nodes []string `json:"nodes"`
}

// read reads the run in dir (an artifacts tree or opx run --out) with the one reader of a
// run (results.Stream): every requested case with its verdict, and each measured one's
// headline metric, spread and provenance.
func read(ctx context.Context, dir, manifestFlag string) (*recorded, error) {
	manifestPath, err := results.Resolve(dir, manifestFlag, "--manifest")
	if err != nil {
		return nil, err
	}
	rec := &recorded{cells: map[string]*pyjson.Object{}}
	byKey := map[string]int{}
	put := func(p point) {
		if i, ok := byKey[p.key]; ok {
			rec.points[i] = p
			return
		}
		byKey[p.key] = len(rec.points)
		rec.points = append(rec.points, p)
	}
	m, err := manifest.LoadOutline(ctx, manifestPath) // the shapes stay text: they are only kept
	if err != nil {
		return nil, err
	}
	if rec.confirms, err = confirmsOf(m.Raw); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestPath, err)
	}
	cellOf := map[string]string{} // shard id: its cell's key
	n := 0
	for _, c := range m.Cells {
		k := cellKey(c.Raw)
		cellOf[c.ID], rec.cells[k] = k, c.Raw
		n += len(c.Cases) * max(1, len(c.Backends))
	}
	rec.points = make([]point, 0, n)
	var run *results.Run
	var first time.Time
	err = results.Stream(ctx, manifestPath, dir, func(r *results.Run) { run = r }, func(sh *results.Shard, rows []results.Row) error {
		c := shardContext(sh)
		for _, f := range []*fingerprint.Fingerprint{sh.Before, sh.After} {
			if f != nil && !f.TakenAt.IsZero() && (first.IsZero() || f.TakenAt.Before(first)) {
				first = f.TakenAt
			}
		}
		for i := range rows {
			r := &rows[i]
			if r.Mode == "counters" { // a profiled execution: its timing is the profiler's
				continue
			}
			if r.Extra { // no requested case: counted, never a series (as the ledger does)
				rec.extra++
				continue
			}
			put(pointOf(r, c, cellOf[sh.ID]))
		}
		return nil
	}, func(sh *results.Shard, cases []results.Case) error {
		for i := range cases {
			c := &cases[i]
			if c.Status != verdict.Missing.String() {
				continue // an error row: handed with the rows
			}
			p := point{key: c.Key, testlist: c.Testlist, op: c.Op, args: c.ArgsJSON, backend: c.Backend, cluster: c.Cluster,
				ws: c.WorldSize, outcome: verdict.Missing, gpuSeconds: c.GPUSeconds, ctx: shardContext(sh), cell: cellOf[sh.ID]}
			p.testbed()
			put(p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, rec.settle(ctx, dir, run, m, first)
}

// pointOf is a result row as a point of its series: its case, outcome and headline
// metric with its spread (a measured row of no finite, positive value is an error).
func pointOf(r *results.Row, c context_, cell string) point {
	p := point{key: r.Key(), testlist: r.Testlist, op: r.OpType, args: r.ArgsJSON(), backend: r.Backend,
		cluster: r.Cluster, ws: r.WorldSize, outcome: verdict.OfStatus(r.Status), gpuSeconds: r.GPUSeconds,
		ctx: c, cell: cell}
	p.testbed()
	p.ctx.Throttle, p.ctx.Contended = r.Throttled, r.Contended
	if name, ok := r.Primary(); ok {
		p.metric, p.lower = name, results.DirectionOf(name) == results.Lower
		if p.outcome == verdict.Measured {
			p.value = r.Metrics[name]
			if lo, hi, _, ok := r.Spread(name); ok {
				p.lo, p.hi, p.spread = lo, hi, true
			}
			p.n = len(r.Samples[name])
		}
	}
	if p.outcome == verdict.Measured && !(p.value > 0 && !math.IsInf(p.value, 0)) {
		p.outcome = verdict.Error // results.rowOf already says so; never a point of no value
	}
	return p
}

// settle gives a read run its identity and time: its run id and source SHA (the
// manifest's when no execution was read), its newest attempt, when it measured (its first
// allocation, else its fingerprints' first time, else run.json's start), the opx that ran
// it, and how many of its points are measured.
func (rec *recorded) settle(ctx context.Context, dir string, run *results.Run, m *manifest.Manifest, first time.Time) error {
	rec.runID, rec.sourceSHA = run.RunID, run.SourceSHA
	if rec.runID == "" { // no execution was read: the manifest says whose run it is
		rec.runID, rec.sourceSHA = m.RunID, m.SourceSHA
	}
	for _, a := range run.Ledger.Attempts {
		rec.attempt = max(rec.attempt, a.Attempt)
	}
	rec.at, _ = run.Ledger.Measured() // when the run measured: its first allocation
	if rec.at.IsZero() {
		rec.at = first // else its fingerprints' times
	}
	if r, err := results.ReadRunRecord(ctx, dir); err == nil {
		rec.opxVersion = r.OpxVersion
		if t, err := time.Parse(time.RFC3339, r.StartedAt); err == nil && rec.at.IsZero() {
			rec.at = t
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, p := range rec.points {
		if p.outcome == verdict.Measured {
			rec.measured++
		}
	}
	if !rec.at.IsZero() {
		rec.origin = rec.at.UTC().Format(time.RFC3339Nano)
	}
	return nil
}

// LocalRunner is the cluster of a run on the machine opx runs on (the local runner).
const LocalRunner = "local"

// testbed keys a local run's point by its machine: cluster "local@HOST" (the node its
// fingerprint names), so two machines' runs of one case are two series, and one machine's
// runs stay one. A cluster's points stay keyed by the cluster.
func (p *point) testbed() {
	if p.cluster != LocalRunner || p.ctx.Node == "" {
		return
	}
	p.cluster = LocalRunner + "@" + p.ctx.Node
	p.key = results.CaseKey(p.testlist, p.op, p.args, p.backend, p.ws, p.cluster)
}

// gz is b gzipped.
func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// cellKey is what the store dedupes a cell on, worked out without its cases: its id (a
// hash of what the planner made it from, cases included) and a digest of its other
// members but the queue token (a new run gets its own; the image fields are set after
// the id). Its body is made only when the store does not hold it yet (cellBody).
func cellKey(raw *pyjson.Object) string {
	o := pyjson.NewObject()
	for _, m := range raw.Members() {
		if m.Key != "queue-token" && m.Key != "cases" {
			o.Set(m.Key, m.Value)
		}
	}
	id, _ := raw.String("id")
	h := sha256.Sum256(pyjson.MustMarshal(pyjson.Resolve(o), pyjson.Identity))
	return id + ":" + hex.EncodeToString(h[:12])
}

// cellBody is a cell as the confirmation manifest needs it again: its JSON without the
// queue token, gzipped.
func cellBody(raw *pyjson.Object) []byte {
	o := pyjson.NewObject()
	for _, m := range raw.Members() {
		if m.Key != "queue-token" {
			o.Set(m.Key, m.Value)
		}
	}
	return gz(pyjson.MustMarshal(pyjson.Resolve(o), pyjson.Identity))
}

var errAlready = errors.New("already recorded")

// Run is a run read for the store (ReadRun), not yet written (Store.Add).
type Run struct {
	dir string
	rec *recorded
}

// MaxSkew is how far after now a run's time may lie (clocks of a cluster and of the
// machine adding it differ a little): a run dated later is refused, since it would stay
// the newest in every series' time for good.
const MaxSkew = 10 * time.Minute

// ReadRun reads the run in dir (its manifest given, or the one found in dir) at its own
// time (at, when not zero, instead: a backfill), before any store is opened: a run that
// cannot be read leaves no store behind.
func ReadRun(ctx context.Context, dir, manifest string, at time.Time) (*Run, error) {
	rec, err := read(ctx, dir, manifest)
	if err != nil {
		return nil, err
	}
	if !at.IsZero() {
		rec.at = at
		if rec.origin == "" {
			rec.origin = "at " + at.UTC().Format(time.RFC3339Nano)
		}
	}
	if rec.at.IsZero() {
		return nil, fmt.Errorf("%s: the run records no time it measured (no allocation, fingerprint or run.json): pass --at", dir)
	}
	if now := time.Now(); rec.at.After(now.Add(MaxSkew)) {
		return nil, fmt.Errorf("%s: the run is dated %s, %s after now: a clock skew or an --at typo? It would stay the newest run for good; give its real time with --at",
			dir, rec.at.UTC().Format(time.RFC3339), rec.at.Sub(now).Round(time.Minute))
	}
	return &Run{dir: dir, rec: rec}, nil
}

// Add records a run read by ReadRun.
func (s *Store) Add(ctx context.Context, r *Run) (*Added, error) {
	dir, rec := r.dir, r.rec
	out := &Added{Dir: dir, RunID: rec.runID, At: rec.at, Cases: len(rec.points), Measured: rec.measured, Extra: rec.extra}
	if rec.confirms != nil {
		out.Confirms = rec.confirms.RunID
	}
	out.Escaped = rec.storableRun() // one text on both stores
	if d := storable(dir); d != dir {
		out.Escaped, dir = append(out.Escaped, fmt.Sprintf("run directory %q", dir)), d
	}
	err := s.write(ctx, dir, rec)
	if errors.Is(err, errAlready) {
		out.Already, out.At = true, rec.at
		return out, nil
	}
	out.Replaced = rec.replaced
	return out, err
}

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

// shardContext is the shard's provenance as a point keeps it: its node (the fingerprint's,
// else the hosts its results name), GPU model, driver, image digest and clocks.
func shardContext(sh *results.Shard) context_ {
	c := context_{ImageDigest: sh.Digest, Node: strings.Join(sh.Hosts, ",")}
	f := sh.Before
	if f == nil {
		f = sh.After
	}
	if f != nil {
		if f.Node != "" {
			c.Node = f.Node
		}
		n := f.Summary()
		c.GPU, c.Driver, c.SMClock = n.Models, f.Driver, n.MaxSMClock
		c.Kind = machineKind(f, n)
	}
	return c
}

// machineKind is what kind of machine a fingerprint is, in words: its GPUs' model, max SM
// clock and power limit ("NVIDIA H200 at 1980 MHz, 700 W"); without a GPU, its CPU model,
// cores and memory ("AMD EPYC 9654 96-Core Processor, 192 cores, 755 GiB"), with its flags'
// digest. Two machines of one kind measure alike; a pool of kinds is judged kind by kind.
func machineKind(f *fingerprint.Fingerprint, n fingerprint.Node) string {
	var parts []string
	if n.Models != "" {
		parts = append(parts, n.Models)
		if n.MaxSMClock != "" {
			parts[0] += " at " + n.MaxSMClock
		}
		if n.PowerLimit != "" {
			parts = append(parts, n.PowerLimit)
		}
		return strings.Join(parts, ", ")
	}
	if f.CPU == "" {
		return ""
	}
	parts = append(parts, f.CPU)
	if f.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", f.Cores))
	}
	if f.MemMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", (f.MemMiB+512)/1024))
	}
	if f.CPUFlags != "" {
		parts = append(parts, "flags "+f.CPUFlags)
	}
	return strings.Join(parts, ", ")
}

// confirmsOf is the manifest's "confirms" member (nil when it has none: a run of its own).
func confirmsOf(raw *pyjson.Object) (*Confirms, error) {
	v, ok := raw.Get("confirms")
	if !ok || v == nil {
		return nil, nil
	}
	b, err := pyjson.Marshal(pyjson.Resolve(v), pyjson.Default) // read as the manifest's outline: its deeper parts are text
	if err != nil {
		return nil, err
	}
	var c Confirms
	if err := json.Unmarshal(b, &c); err != nil || c.RunID == "" || c.At.IsZero() || c.Origin == "" {
		return nil, fmt.Errorf(`"confirms" is not {"run_id", "at", "origin", "cases"} of a confirmation manifest (opx history check --confirm-manifest)`)
	}
	return &c, nil
}
