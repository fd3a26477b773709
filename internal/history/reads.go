// The store's reads by run and by series, as opx serve shows them: its state, the runs
// with their tallies, a run's cases, a series' points and changes (and what its plot
// draws, plot.Series) and the same case elsewhere.

package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/plot"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/verdict"
)

// What opx serve reads of a store, beside Check and Triage: its state, its runs, a run's
// cases and one series with its points, changes and the same case on other clusters.

// State is a text that changes whenever the store's runs do (a run added or replaced):
// opx serve keeps the check it worked out while the state is the same (triage is read
// live: Triaged).
func (s *Store) State(ctx context.Context) (string, error) { return s.stateIn(ctx, s.db) }

// stateIn is State as db (the store, or a transaction of it) sees it.
func (s *Store) stateIn(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (string, error) {
	var runs, maxID, added int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(id), 0), COALESCE(MAX(added_at), 0) FROM runs").Scan(&runs, &maxID, &added); err != nil {
		return "", fmt.Errorf("%s: %w", s.Where, err)
	}
	return fmt.Sprintf("%d/%d/%d", runs, maxID, added), nil
}

// NewestAdded is when the newest run was added (zero when none was).
func (s *Store) NewestAdded(ctx context.Context) (time.Time, error) {
	var at int64
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(added_at), 0) FROM runs").Scan(&at); err != nil || at == 0 {
		return time.Time{}, err
	}
	return time.Unix(at, 0), nil
}

// Triaged gives each change its triage state and events as the store holds them now.
func (s *Store) Triaged(ctx context.Context, chs []Change) error { return s.triaged(ctx, chs) }

// Ping is whether the store answers a query.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// RunSummary is one stored run as the runs page lists it.
type RunSummary struct {
	ID         int64         `json:"store_id"`
	RunID      string        `json:"run_id"`
	Attempt    int           `json:"attempt"`
	At         time.Time     `json:"at"`
	SourceSHA  string        `json:"source_sha"`
	OpxVersion string        `json:"opx_version"`
	Confirms   bool          `json:"confirmation"`
	Tally      verdict.Tally `json:"cases"`
	Verdict    string        `json:"verdict"`
	Line       string        `json:"line"`
	// Hours is what the run's cases held, in Unit-hours: GPU, or CPU for a run of the
	// local runner (processes on the machine's CPU), as the run's own report says.
	Hours float64 `json:"hours"`
	Unit  string  `json:"unit"`
}

// runTally is a run's cases by backend, each [measured, unsupported, error, missing],
// and its GPU-milliseconds: what the runs page shows of it, counted once when it is added.
type runTally struct {
	Backends map[string][4]int64 `json:"backends"`
	GPUms    int64               `json:"gpu_ms"`
	// CPU is whether every case ran on the local runner (its time is CPU time); nil in a
	// tally recorded before it was kept
	CPU *bool `json:"cpu,omitempty"`
}

func (t *runTally) add(backend string, o verdict.Outcome, n, ms int64) {
	if t.Backends == nil {
		t.Backends = map[string][4]int64{}
	}
	c := t.Backends[backend]
	if i := map[verdict.Outcome]int{verdict.Measured: 0, verdict.Unsupported: 1, verdict.Error: 2, verdict.Missing: 3}[o]; i >= 0 {
		c[i] += n
	}
	t.Backends[backend] = c
	t.GPUms += ms
}

// tally is the run's runTally as the runs table keeps it (JSON).
func (rec *recorded) tally() string {
	var t runTally
	cpu := len(rec.points) > 0
	for _, p := range rec.points {
		t.add(p.backend, p.outcome, 1, int64(math.Round(p.gpuSeconds*1000)))
		cpu = cpu && IsLocal(p.cluster)
	}
	t.CPU = &cpu
	b, _ := json.Marshal(t)
	return string(b)
}

// RunList is every stored run, newest first, with its cases by outcome, its verdict (the
// one definition, over its stored cases) and its GPU-hours — from the tally each run got
// when it was added, or, for a run added before runs had one, counted from its points.
func (s *Store) RunList(ctx context.Context) ([]RunSummary, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, run_id, attempt, at, source_sha, opx_version, confirms IS NOT NULL, tally FROM runs ORDER BY at DESC, id DESC")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	var out []RunSummary
	tallies := map[int64]*runTally{}
	var untallied []int64
	for rows.Next() {
		var r RunSummary
		var at int64
		var tally sql.NullString
		if err := rows.Scan(&r.ID, &r.RunID, &r.Attempt, &at, &r.SourceSHA, &r.OpxVersion, &r.Confirms, &tally); err != nil {
			rows.Close()
			return nil, err
		}
		r.At = time.Unix(at, 0).UTC()
		t := &runTally{}
		if !tally.Valid || json.Unmarshal([]byte(tally.String), t) != nil {
			untallied = append(untallied, r.ID)
		}
		tallies[r.ID] = t
		out = append(out, r)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for _, id := range untallied { // one run's points a query (points_run: an index range)
		if err := s.countRun(ctx, id, tallies[id]); err != nil {
			return nil, err
		}
	}
	for id, t := range tallies { // a tally of before the unit was kept: one point says it
		if t.CPU == nil {
			var cluster string
			err := s.db.QueryRowContext(ctx, s.q("SELECT s.cluster FROM points p JOIN series s ON s.id = p.series WHERE p.run = ? LIMIT 1"), id).Scan(&cluster)
			if err != nil && !isNoRows(err) {
				return nil, fmt.Errorf("%s: %w", s.Where, err)
			}
			cpu := err == nil && IsLocal(cluster)
			t.CPU = &cpu
		}
	}
	for i := range out {
		t := tallies[out[i].ID]
		var judge verdict.Run
		for _, b := range slices.Sorted(maps.Keys(t.Backends)) {
			for o, n := range map[verdict.Outcome]int64{verdict.Measured: t.Backends[b][0], verdict.Unsupported: t.Backends[b][1], verdict.Error: t.Backends[b][2], verdict.Missing: t.Backends[b][3]} {
				judge.Cases(b, o, int(n))
			}
		}
		v := judge.Verdict()
		out[i].Tally, out[i].Verdict, out[i].Line, out[i].Hours = v.Tally, v.Word(), v.Line(), float64(t.GPUms)/1000/3600
		out[i].Unit = unitOf(*t.CPU)
	}
	return out, nil
}

// countRun counts a run's points into t.
func (s *Store) countRun(ctx context.Context, id int64, t *runTally) error {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT s.backend, p.outcome, COUNT(*), COALESCE(SUM(p.gpu_ms), 0)
		FROM points p JOIN series s ON s.id = p.series WHERE p.run = ? GROUP BY s.backend, p.outcome`), id)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var backend string
		var outcome int
		var n, ms int64
		if err := rows.Scan(&backend, &outcome, &n, &ms); err != nil {
			return err
		}
		t.add(backend, verdict.Outcome(outcome), n, ms)
	}
	return rows.Err()
}

// CasePoint is one case of a stored run.
type CasePoint struct {
	Key       string   `json:"key"`
	Testlist  string   `json:"testlist"`
	Op        string   `json:"op"`
	Args      string   `json:"args"`
	Label     string   `json:"args_label"`
	Backend   string   `json:"backend"`
	Cluster   string   `json:"cluster"`
	WorldSize int      `json:"world_size"`
	Metric    string   `json:"metric"`
	Lower     bool     `json:"lower_is_better"`
	Outcome   string   `json:"outcome"`
	Value     *float64 `json:"value,omitempty"`
	Lo        *float64 `json:"lo,omitempty"`
	Hi        *float64 `json:"hi,omitempty"`
	Node      string   `json:"node"`
	// Seconds is the case's share of its attempt's Unit time (GPU, or CPU on the local
	// runner).
	Seconds float64  `json:"seconds"`
	Unit    string   `json:"unit"`
	SOLPct  *float64 `json:"pct_of_roofline,omitempty"`
}

// RunCases is a stored run's cases (id: its store id), by case key.
func (s *Store) RunCases(ctx context.Context, id int64) ([]CasePoint, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT s.key, s.testlist, s.op, s.args, s.backend, s.cluster, s.world_size, s.metric, s.lower_is_better,
		p.outcome, p.value, p.lo, p.hi, c.node, COALESCE(p.gpu_ms, 0)
		FROM points p JOIN series s ON s.id = p.series JOIN contexts c ON c.id = p.ctx WHERE p.run = ? ORDER BY s.key`), id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer rows.Close()
	out := []CasePoint{}
	for rows.Next() {
		var c CasePoint
		var lower, outcome int
		var v, lo, hi sql.NullFloat64
		var ms int64
		if err := rows.Scan(&c.Key, &c.Testlist, &c.Op, &c.Args, &c.Backend, &c.Cluster, &c.WorldSize, &c.Metric, &lower,
			&outcome, &v, &lo, &hi, &c.Node, &ms); err != nil {
			return nil, err
		}
		c.Lower, c.Outcome, c.Seconds, c.Unit = lower != 0, verdict.Outcome(outcome).String(), float64(ms)/1000, unitOf(IsLocal(c.Cluster))
		c.Value, c.Lo, c.Hi = ptr(v), ptr(lo), ptr(hi)
		c.label()
		out = append(out, c)
	}
	return out, rows.Err()
}

func ptr(v sql.NullFloat64) *float64 {
	if !v.Valid {
		return nil
	}
	return &v.Float64
}

// label gives the case its args label and, when measured in µs, its % of the roofline on
// its cluster's hardware (sol).
func (c *CasePoint) label() {
	a, err := summary.ParseArgs([]byte(c.Args))
	if err != nil {
		return
	}
	c.Label = a.Label()
	if c.Value == nil || c.Metric != "latency_us" {
		return
	}
	r := results.Row{OpType: c.Op, Args: a, WorldSize: c.WorldSize, Runner: RunnerOf(c.Cluster), Status: "ok",
		Metrics: map[string]float64{"latency_us": *c.Value}}
	if _, j, ok := r.SOL(); ok && j.SOL > 0 && !math.IsInf(j.SOL, 0) {
		pct := j.SOL
		c.SOLPct = &pct
	}
}

// SeriesPoint is one run's point of a series, oldest first.
type SeriesPoint struct {
	RunID   string    `json:"run_id"`
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Value   *float64  `json:"value,omitempty"`
	Lo      *float64  `json:"lo,omitempty"`
	Hi      *float64  `json:"hi,omitempty"`
	Node    string    `json:"node"`
	// Notes say what changed under it since the point before: source SHA, image digest,
	// driver, node.
	Notes []string `json:"notes,omitempty"`
}

// SeriesView is one series as its page shows it.
type SeriesView struct {
	Key       string        `json:"key"`
	Testlist  string        `json:"testlist"`
	Op        string        `json:"op"`
	Args      string        `json:"args"`
	Backend   string        `json:"backend"`
	Cluster   string        `json:"cluster"`
	WorldSize int           `json:"world_size"`
	Metric    string        `json:"metric"`
	Lower     bool          `json:"lower_is_better"`
	Points    []SeriesPoint `json:"points"`
	Changes   []Change      `json:"changes"`
	// Others is the same case on the other clusters: each's latest measured value.
	Others []CasePoint `json:"other_clusters"`
	// Drawn is what its plot draws (plot.SVG): its measured points and its changes.
	Drawn plot.Series `json:"-"`
}

// ErrNoSeries is Series' answer for a key the store does not hold.
var ErrNoSeries = fmt.Errorf("no such series")

// Series is the series of key: its newest lookback points, its changes as check finds
// them at the newest run (with their triage), its plot, and the same case elsewhere.
func (s *Store) Series(ctx context.Context, key string, lookback int) (*SeriesView, error) {
	if !lookupable(key) { // no store holds it: the same answer from both
		return nil, ErrNoSeries
	}
	se := &seriesRow{}
	var lower int
	err := s.db.QueryRowContext(ctx, s.q("SELECT id, key, testlist, op, args, backend, world_size, cluster, metric, lower_is_better FROM series WHERE key = ?"), key).
		Scan(&se.id, &se.key, &se.testlist, &se.op, &se.args, &se.backend, &se.ws, &se.cluster, &se.metric, &lower)
	if isNoRows(err) {
		return nil, ErrNoSeries
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	se.lower = lower != 0
	runs, err := s.runs(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[int64]RunRef{}
	for _, r := range runs {
		byID[r.id] = r
	}
	ctxs, meta, err := s.provenanceOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.window(ctx, []*seriesRow{se}, lookback); err != nil {
		return nil, err
	}
	if err := se.load(ctxs, byID, s.Where); err != nil {
		return nil, err
	}
	v := &SeriesView{Key: se.key, Testlist: se.testlist, Op: se.op, Args: se.args, Backend: se.backend, Cluster: se.cluster,
		WorldSize: se.ws, Metric: se.metric, Lower: se.lower, Changes: []Change{}}
	if len(runs) > 0 && len(se.points) > 0 {
		test := byID[se.points[len(se.points)-1].run]
		o := CheckOptions{Options: changes.Defaults}
		for _, f := range se.changesOf(se.judge(map[int64]bool{test.id: true}, o.Options), byID, ctxs, meta, o) {
			v.Changes = append(v.Changes, f.ch)
		}
		se.changes = v.Changes
		if err := s.triaged(ctx, v.Changes); err != nil {
			return nil, err
		}
	}
	v.Points = seriesPoints(se, byID, ctxs, meta)
	v.Drawn = plotOf(se)
	if v.Others, err = s.others(ctx, se); err != nil {
		return nil, err
	}
	return v, nil
}

// seriesPoints are the series' points with what changed under each.
func seriesPoints(se *seriesRow, byID map[int64]RunRef, ctxs map[int64]context_, meta map[int64]runMeta) []SeriesPoint {
	out := make([]SeriesPoint, 0, len(se.points))
	for j, p := range se.points {
		pt := SeriesPoint{RunID: byID[p.run].RunID, At: time.Unix(p.at, 0).UTC(), Outcome: p.outcome.String(), Node: ctxs[p.ctx].Node,
			Value: ptr(p.value), Lo: ptr(p.lo), Hi: ptr(p.hi)}
		if j > 0 {
			q := se.points[j-1]
			a, b := ctxs[q.ctx], ctxs[p.ctx]
			for _, d := range []struct{ what, x, y string }{{"source", short12(meta[q.run].sourceSHA), short12(meta[p.run].sourceSHA)},
				{"image", a.ImageDigest, b.ImageDigest}, {"driver", a.Driver, b.Driver}, {"node", a.Node, b.Node}} {
				if d.x != d.y && d.x != "" && d.y != "" {
					pt.Notes = append(pt.Notes, d.what+" "+d.x+" → "+d.y)
				}
			}
		}
		out = append(out, pt)
	}
	return out
}

func short12(s string) string { return s[:min(len(s), 12)] }

// others is the same case (testlist, op, args, backend, world size, metric) on the other
// clusters, each with its latest measured point.
func (s *Store) others(ctx context.Context, se *seriesRow) ([]CasePoint, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, key, cluster FROM series
		WHERE args = ? AND op = ? AND backend = ? AND world_size = ? AND metric = ? AND testlist = ? AND key <> ? ORDER BY cluster`),
		se.args, se.op, se.backend, se.ws, se.metric, se.testlist, se.key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	out := []CasePoint{}
	var ids []int64
	for rows.Next() {
		c := CasePoint{Testlist: se.testlist, Op: se.op, Args: se.args, Backend: se.backend, WorldSize: se.ws, Metric: se.metric,
			Lower: se.lower, Outcome: verdict.Measured.String()}
		var id int64
		if err := rows.Scan(&id, &c.Key, &c.Cluster); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
		out = append(out, c)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for i, id := range ids {
		var v sql.NullFloat64
		err := s.db.QueryRowContext(ctx, s.q(`SELECT p.value, c.node FROM points p JOIN contexts c ON c.id = p.ctx
			WHERE p.series = ? AND p.outcome = ? ORDER BY p.at DESC LIMIT 1`), id, int(verdict.Measured)).Scan(&v, &out[i].Node)
		if err != nil && !isNoRows(err) {
			return nil, fmt.Errorf("%s: %w", s.Where, err)
		}
		out[i].Value = ptr(v)
		out[i].label()
	}
	return out, nil
}

// Readers lets n queries run at once on a SQLite store (WAL mode: readers never wait for
// one another or for the writer), for a process that reads on many goroutines: opx serve.
// A PostgreSQL store keeps its pool.
func (s *Store) Readers(n int) {
	s.readers = n
	if !s.pg {
		s.db.SetMaxOpenConns(n)
	}
}
