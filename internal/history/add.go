// Adding a run (opx history add): reading a run directory's manifest, results and
// fingerprints into points, as one run the store records (write.go writes it).

package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
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
