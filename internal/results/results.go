// Package results reads what a run measured: its shards, every attempt's rows and the case ledger
// (each case's best row over all attempts), for every command that reads a run.
//
// It reads what a run measured: the shards summarize chose (the newest
// attempt of each), their cells from execution.json, and every row of their results files
// with its metrics and the provenance the harness recorded. It is what `opx report` and
// `opx compare` work from, so both see exactly the shards summarize counted.
package results

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/counters"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/sol"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/verdict"
)

// Run is one run's artifacts, read.
type Run struct {
	Dir, Manifest    string
	RunID, SourceSHA string
	Summary          *summary.Report
	Shards           []Shard // manifest order
	Ledger           *Ledger // every requested case over all attempts
}

// Shard is a manifest cell with what its chosen execution recorded.
type Shard struct {
	summary.Shard
	Runner, Cluster, Image, Digest, Mode string
	WorldSize, Nodes, GPUsPerNode        int
	Backends                             []string
	ExitCode                             string // status.json exit_code as written, "" when absent
	HasStatus                            bool   // status.json was there
	// Failure is what status.json says failed (beyond the seed): the phase, the error
	// and the phase's log, a file in Dir.
	FailPhase, FailMessage, FailLog string
	Peak                            *sol.Peak // the site's limits, when execution.json records them
	Hosts, Versions                 []string
	Software                        map[string]string
	Runs                            []string // results run ids
	// Before and After are the node's fingerprints around the benchmark (nil when the
	// execution recorded none); Throttle is which of its GPUs power or heat held down.
	Before, After *fingerprint.Fingerprint
	Throttle      fingerprint.Throttle
}

// Row is one result row with the shard facts that make up its case key.
type Row struct {
	Shard, Testlist, OpType, Backend, Cluster, Runner string
	WorldSize, Attempt                                int
	Args                                              summary.Args // none for a lean row, or one without an args object
	ArgsKey, ArgsLabel                                string
	Status, Message                                   string
	Metrics                                           map[string]float64
	Samples                                           map[string][]float64 // metrics given as number lists
	MetricOrder                                       []string
	Impossible                                        bool      // above its hardware's limit (set by compare.Read; SOL says it)
	SOLPct                                            float64   // its % of the roofline (set by compare.Read; 0 when not judged)
	Peak                                              *sol.Peak // its shard's site limits, if any
	GPUSeconds                                        float64   // its case's GPU time over all attempts (Case.GPUSeconds)
	Throttled                                         string    // why its GPUs were throttled while its attempt ran ("" when they were not, or unknown)
	Contended                                         string    // what contended with its measurement: other opx runs measuring on its machine, a busy machine (fingerprint.Contention; "" when nothing did)
	// RunID and SourceSHA are its execution's provenance, StartedAt when its attempt's
	// allocation was granted (RFC 3339, UTC; "" when not recorded), Host the machine its
	// results file names (else its node's fingerprint): rows of several runs put together
	// stay apart.
	RunID, SourceSHA, StartedAt, Host string
	// Index is the row's place in its results file: op <Index>, whose kernels counters
	// mode finds in the opx<Index> range. Mode is its execution's (timing or counters);
	// Counters its kernels' counters (counters mode), CounterProblem why it has none.
	Index          int
	Mode           string
	Counters       *counters.Case
	CounterProblem string
	Tries          int // rows written for its case over all attempts
	// Invalid is whether the harness wrote it as ok but its headline metric is no
	// measurement (missing, not finite or not positive): its Status is then "error" and
	// its Message says why, in every command.
	Invalid bool
	// Extra is whether it is a row of no requested case (the ledger counts it as extra,
	// never as a case).
	Extra   bool
	key     string          // the case key it was settled by (Key), made once by the run's reader
	metrics summary.Metrics // its metrics as read, until it is shown (Metrics)
	whole   bool            // read whole (not lean): it has its args, and its metrics until shown
}

// Key is the stable case key (CaseKey): the same case in two runs has the same key. A
// row from the run's reader carries the key it was settled by.
func (r *Row) Key() string {
	if r.key != "" {
		return r.key
	}
	return CaseKey(r.Testlist, r.OpType, r.ArgsJSON(), r.Backend, r.WorldSize, r.Cluster)
}

// KeyFields are the fields of the case key, in order; compare --key joins on a subset.
var KeyFields = []string{"testlist", "op", "args", "backend", "world_size", "cluster"}

// KeyOf is the key made of the named fields (each one of KeyFields), in KeyFields' order.
func (r *Row) KeyOf(fields []string) string {
	if len(fields) >= len(KeyFields) && !slices.ContainsFunc(KeyFields, func(f string) bool { return !slices.Contains(fields, f) }) {
		return r.Key() // every field: the case key
	}
	var parts []string
	for _, f := range KeyFields {
		if !slices.Contains(fields, f) {
			continue
		}
		switch f {
		case "testlist":
			parts = append(parts, r.Testlist)
		case "op":
			parts = append(parts, r.OpType)
		case "args":
			parts = append(parts, r.ArgsJSON())
		case "backend":
			parts = append(parts, r.Backend)
		case "world_size":
			parts = append(parts, "ws="+strconv.Itoa(r.WorldSize))
		case "cluster":
			parts = append(parts, r.Cluster)
		}
	}
	return strings.Join(parts, " | ")
}

// SOL is an ok row against its hardware's limits (internal/sol): its shard's site peaks or
// its family's, and the harness's own "flops"/"bytes" metrics over the formulas when it
// reports them. ok is false for rows that are not ok, not timed, or not known to sol.
func (r *Row) SOL() (sol.Work, sol.Judgement, bool) {
	us, ok := r.LatencyUS()
	if !ok || r.Status != "ok" {
		return sol.Work{}, sol.Judgement{}, false
	}
	return sol.Judged(sol.Case{Op: r.OpType, Args: &r.Args, WorldSize: r.WorldSize, Runner: r.Runner, LatencyUS: us,
		Peak: r.Peak, FLOPs: r.Metrics["flops"], Bytes: r.Metrics["bytes"]})
}

// ArgsJSON is the args as the key has them: json.dumps(args, sort_keys=True), worked out
// when first asked (the report does not need it).
func (r *Row) ArgsJSON() string {
	if r.ArgsKey == "" {
		r.ArgsKey = r.Args.Text()
	}
	return r.ArgsKey
}

// Field is the row's value of a key field, as a filter compares it.
func (r *Row) Field(f string) string {
	switch f {
	case "testlist":
		return r.Testlist
	case "op":
		return r.OpType
	case "args":
		return r.ArgsLabel
	case "backend":
		return r.Backend
	case "world_size":
		return strconv.Itoa(r.WorldSize)
	case "cluster":
		return r.Cluster
	case "runner":
		return r.Runner
	case "status":
		return r.Status
	}
	return ""
}

// Case is the row's case without backend and cluster: what the report lines up across
// backends and hardware.
func (r *Row) Case() string { return r.Testlist + " | " + r.OpType + " " + r.ArgsLabel }

// Series is the backend/hardware column a row belongs to.
func (r *Row) Series() string {
	return fmt.Sprintf("%s on %s ×%d", r.Backend, r.Cluster, r.WorldSize)
}

// FindManifest returns dir/operatorx-manifest.json, or the only file of that name under
// dir (a workflow's downloaded artifacts keep it one level down).
func FindManifest(dir, flag string) (string, error) {
	p := filepath.Join(dir, "operatorx-manifest.json")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	var found []string
	_ = filepath.WalkDir(files.RunDir(dir), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "operatorx-manifest.json" {
			found = append(found, path)
		}
		return nil
	})
	switch len(found) {
	case 0:
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return "", fmt.Errorf("%s is a file, not a run directory: give the directory that holds the run (its operatorx-manifest.json), such as %s", dir, filepath.Dir(dir))
		} else if err != nil {
			return "", fmt.Errorf("run directory %s: not found", dir)
		}
		return "", fmt.Errorf("%s: no operatorx-manifest.json in it; pass %s", dir, flag)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s: %d manifests in it (%s, %s, ...); pass %s", dir, len(found), found[0], found[1], flag)
}

// Resolve is manifest when given, else the one found in dir; flag is the option that names
// it, for the message when there is none or more than one.
func Resolve(dir, manifest, flag string) (string, error) {
	if manifest != "" {
		return manifest, nil
	}
	return FindManifest(dir, flag)
}

// Stream reads a run one shard at a time, for readers that need the ledger's totals but
// not its cases (report, export, compare): start gets the run (its shards, summary and
// ledger are filled in as Stream goes), then rows gets each shard's rows: for every
// requested case the best row of any attempt (the case ledger's choice, see Ledger), in
// case order, then the rows of the newest attempt that are no requested case — in shard
// order. Every results file is parsed once, and what Stream holds is one shard's rows
// (all its attempts), so a run of any size is read in bounded memory: the run's Ledger
// has its totals, attempts and first missing cases, not every case (Cover keeps them).
// missing, when not nil, gets each shard's cases that have no ok or unsupported row.
func Stream(ctx context.Context, manifest, artifacts string, start func(*Run), rows func(*Shard, []Row) error, missing func(*Shard, []Case) error) error {
	return walk(ctx, manifest, artifacts, walker{missing: missing}, start, rows)
}

// walk is Stream and Cover (opt says which: keep, missing); lean rows carry their key,
// status and message only (no metrics, no label): what the ledger alone needs. The
// shards are read — every file of every attempt parsed — on every core (par.Ordered),
// and settled in manifest order: the ledger, the rows handed on and the first error are
// those of a reading in order, and at most a few shards are held at a time.
func walk(ctx context.Context, manifest, artifacts string, opt walker, start func(*Run), rows func(*Shard, []Row) error) error {
	wk := &opt
	wk.manifest, wk.rows = manifest, rows
	wk.run = &Run{Dir: artifacts, Manifest: manifest, Ledger: &Ledger{}}
	start(wk.run)
	rep, err := summary.Find(ctx, manifest, artifacts)
	if err != nil {
		return err
	}
	defer rep.Close() // the manifest's file, which the shards' cases are read from
	run := wk.run
	run.Summary = rep
	run.Shards = make([]Shard, len(rep.Shards))
	run.Ledger.CPU = len(rep.Shards) > 0
	for _, s := range rep.Shards {
		run.Ledger.CPU = run.Ledger.CPU && s.Cell.Runner == "local" // platform.Local: processes on this CPU
	}
	err = par.Ordered(ctx, len(rep.Shards), runtime.GOMAXPROCS(0), func(ctx context.Context, i int) (*shardRead, error) {
		return wk.readShard(ctx, &rep.Shards[i])
	}, wk.settle)
	if err != nil {
		return err
	}
	run.Ledger.RunID, run.Ledger.SourceSHA = run.RunID, run.SourceSHA
	rep.Success = run.Ledger.Verdict().OK
	return nil
}

// rowBufs hold an attempt's rows while its shard is settled (settleShard copies out the
// rows it keeps).
var rowBufs = sync.Pool{New: func() any { return new([]Row) }}

// caseTexts hold a cell's cases as its manifest writes them while its shard is read.
var caseTexts = sync.Pool{New: func() any { return new([]byte) }}

// ledgerLines hold a shard's cases as the ledger writes them, from the core that settled
// them to the ledger's file.
var ledgerLines = sync.Pool{New: func() any { return new([]byte) }}

// walker is one reading of a run: what it keeps, and where it hands the rows.
type walker struct {
	manifest string
	lean     bool                       // rows without metrics or label
	keep     bool                       // the ledger keeps every case (Cover), else only its totals (Stream)
	ledger   *LedgerFile                // where each shard's cases are written (CoverInto)
	missing  func(*Shard, []Case) error // Stream: each shard's cases still to measure
	rows     func(*Shard, []Row) error
	run      *Run
}

// shardRead is one shard read from its files and settled: its facts (those of the
// execution summarize counts), its cases each with its best row of every attempt, the
// rows kept and its attempts, all worked out on the core that read it; the walk adds them
// to the run in manifest order.
type shardRead struct {
	w           *walked
	cases       []Case  // its requested cases, keyed (CellCases) and settled
	kept, extra []Row   // settleShard's
	lines       *[]byte // its cases as the ledger writes them (appendCases), when asked
	attempts    []Attempt
	counted     bool // it has a counted execution, whose run and source are:
	runID, sha  string
	unkeyed     *Unkeyed // its cases cannot be keyed: judged by ci.py's rule
}

// readShard reads a shard and settles it: its cases from the manifest (Cell.ReadCases),
// keyed; every file of every execution — execution.json (already parsed by summary.Find),
// status, accounting, fingerprints and counters, then each execution's results files,
// oldest attempt first; then each case's best row of every attempt (settleShard), and
// its ledger lines when the walk writes the ledger.
func (wk *walker) readShard(ctx context.Context, s *summary.Shard) (*shardRead, error) {
	r := &shardRead{w: &walked{sh: Shard{Shard: *s, Software: map[string]string{}}, hosts: map[string]bool{}, versions: map[string]bool{}}}
	r.w.sh.Cell = nil
	buf := caseTexts.Get().(*[]byte)
	defer caseTexts.Put(buf) // once the cases are settled: those still missing have copied their text
	cell := *s.Cell
	var err error
	if cell.Cases, *buf, err = s.Cell.ReadCases(ctx, *buf); err != nil {
		return nil, err
	}
	var unkeyed *Unkeyed
	if r.cases, err = CellCases(&cell); errors.As(err, &unkeyed) {
		r.unkeyed, r.cases = unkeyed, nil // judged by ci.py's rule (settleStatus)
	} else if err != nil { // keyed here, on every core
		return nil, fmt.Errorf("%s: %w", wk.manifest, err)
	}
	var execs []*execRows
	for _, ex := range s.Executions {
		e, err := readAttempt(ctx, s.ID, ex)
		if err != nil {
			return nil, err
		}
		execs = append(execs, e)
		if ex.Dir == s.Dir {
			if err := readMeta(&r.w.sh, e); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range execs {
		e.rows = (*rowBufs.Get().(*[]Row))[:0]
		what := summary.WholeRows
		if wk.lean {
			what = summary.KeyedRows
		}
		err := summary.Results(ctx, e.ex.Dir, what, func(path string, f *summary.ResultsFile) error {
			e.rows = appendResults(e.rows, f, r.w, wk.lean)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if e.ex.Dir == s.Dir { // the counted execution's status must be readable
			if e.statusErr != nil {
				return nil, e.statusErr
			}
			if e.status != nil && !e.status.HasExitCode {
				return nil, fmt.Errorf("%s: status file has no exit_code", filepath.Join(e.ex.Dir, manifest.StatusFile))
			}
			s.Ended, s.Exited0 = e.status != nil, e.status != nil && e.status.Exited0
			r.counted, r.runID, r.sha = true, e.exe.RunID, e.exe.SourceSHA
		}
	}
	s.Cell = nil                                      // keyed: the cell's shapes are let go as the walk goes
	if r.unkeyed == nil && statusOnly(execs, s.Dir) { // rows of ci.py's minimal form: nothing to key them by
		r.unkeyed, r.cases = &Unkeyed{Shard: s.ID, Why: "its rows carry only a status"}, nil
	}
	if r.kept, r.attempts, r.extra, err = settleShard(ctx, r.cases, execs, s.Dir); err != nil {
		return nil, err
	}
	settleStatus(s, r.cases, execs)
	if r.unkeyed != nil {
		s.Status = seedShardStatus(s)
	}
	for _, e := range execs { // what is kept was copied out
		clear(e.rows)
		rowBufs.Put(&e.rows)
	}
	for i := range r.cases {
		letArgsGo(&r.cases[i])
	}
	if wk.ledger != nil {
		r.lines = ledgerLines.Get().(*[]byte)
		if *r.lines, err = appendCases((*r.lines)[:0], r.cases); err != nil {
			return nil, err
		}
	}
	sh := &r.w.sh
	sh.Shard = *s // the counts and status as settled
	sh.Hosts, sh.Versions = slices.Sorted(maps.Keys(r.w.hosts)), slices.Sorted(maps.Keys(r.w.versions))
	return r, nil
}

// settle adds shard i, read and settled, to the run and its ledger, and hands its rows on.
func (wk *walker) settle(i int, r *shardRead) error {
	run := wk.run
	if r.counted {
		run.RunID, run.SourceSHA = r.runID, r.sha
	}
	run.Shards[i] = r.w.sh
	s := &run.Shards[i].Shard
	l := run.Ledger
	l.Extra += len(r.extra)
	l.add(r.cases, wk.keep)
	if wk.ledger != nil {
		wk.ledger.add(*r.lines)
		ledgerLines.Put(r.lines)
	}
	l.Attempts = append(l.Attempts, r.attempts...)
	l.tally.judge.Shard(s.ID, s.Status)
	if r.unkeyed != nil {
		l.tally.judge.Unkeyed(r.unkeyed.Shard, r.unkeyed.Why)
	}
	if len(r.kept)+len(r.extra) > 0 {
		if err := wk.rows(&run.Shards[i], append(r.kept, r.extra...)); err != nil {
			return err
		}
	}
	if !wk.keep {
		return wk.missingOf(&run.Shards[i], r.cases)
	}
	return nil
}

// seedShardStatus is ci.py's status of a shard whose cases cannot be keyed (Unkeyed):
// not run, or a success when its newest attempt exited 0 with an ok row and no error row,
// else failed. Its rows carry no op, so no metric of theirs is judged (rowOf).
// statusOnly is whether the counted execution (dir), of a cell of ci.py's minimal form (its
// execution.json names no backends: opx execute always writes the whole cell), wrote rows
// and every one carries only a status: no op, no args (ci.py's own tests write such rows).
// opx's own runs are never judged so: a row of theirs without an op is missing.
func statusOnly(execs []*execRows, dir string) bool {
	for _, e := range execs {
		if e.ex.Dir != dir {
			continue
		}
		if len(e.rows) == 0 || len(e.exe.Cell.Backends) > 0 { // opx execute writes the whole cell: its rows are keyed, or missing
			return false
		}
		for i := range e.rows {
			if r := &e.rows[i]; r.OpType != "" || r.Testlist != "" || (r.ArgsKey != "" && r.ArgsKey != "{}") || len(r.Metrics) > 0 {
				return false
			}
		}
		return true
	}
	return false
}

func seedShardStatus(s *summary.Shard) string {
	switch {
	case !s.HasAttempt:
		return verdict.NotRun
	case s.Exited0 && s.OK > 0 && s.Error == 0:
		return verdict.Success
	}
	return verdict.Failed
}

// settleStatus gives a shard the verdict's status over its cases (each its best row of
// every attempt) and how its chosen execution ended, and counts the shard's rows by their
// settled status (an ok row that is no measurement counts as an error): the chosen
// execution's rows, as ci.py counts them, and for each case it did not reach (a resume
// runs only what is missing) the row an older attempt wrote and the ledger kept — so a
// resumed shard's table never shows a stale attempt's counts. With one attempt the counts
// are ci.py's.
func settleStatus(s *summary.Shard, cases []Case, execs []*execRows) {
	var t verdict.Tally
	for i := range cases {
		t.Add(cases[i].Outcome(), 1)
	}
	s.Status = verdict.Shard(s.HasAttempt, s.Exited0, t)
	count := func(status string) {
		switch status {
		case "ok":
			s.OK++
		case "unsupported":
			s.Unsupported++
		default:
			s.Error++
		}
	}
	for _, e := range execs {
		if e.ex.Dir != s.Dir {
			continue
		}
		s.OK, s.Unsupported, s.Error = 0, 0, 0
		for i := range e.rows {
			count(e.rows[i].Status)
		}
		for i := range cases {
			if c := &cases[i]; !c.Reached && c.Outcome() != verdict.Missing {
				count(c.Status)
			}
		}
	}
}

// missingOf hands the shard's cases still to measure to the missing callback.
func (wk *walker) missingOf(sh *Shard, cases []Case) error {
	if wk.missing == nil {
		return nil
	}
	var out []Case
	for _, c := range cases {
		if !c.Done() {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return wk.missing(sh, out)
}

// walked is a shard being read: its facts, and the hosts and harness versions its results
// files name.
type walked struct {
	sh              Shard
	hosts, versions map[string]bool
}

// readMeta fills in a shard's facts from the execution summarize counts.
func readMeta(sh *Shard, e *execRows) error {
	ex := e.exe
	c := ex.Cell
	sh.Runner, sh.Cluster, sh.Image, sh.Digest = c.Runner, c.Cluster, c.Image, c.Digest
	sh.Mode, _ = c.Raw.String("mode") // "" when the cell has none, as the report shows it
	sh.WorldSize, sh.Nodes, sh.GPUsPerNode = int(c.WorldSize), int(c.Nodes), int(c.GPUsPerNode)
	for _, b := range c.Backends {
		if b != "" {
			sh.Backends = append(sh.Backends, b)
		}
	}
	if ex.Peaks != nil {
		site, err := platform.SitePeaks(ex.Peaks)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(sh.Dir, "execution.json"), err)
		}
		p := sol.Override(sol.Peaks[sol.Family(c.Runner)], site)
		sh.Peak = &p
	}
	sh.Before, sh.After = e.before, e.after
	sh.Throttle = fingerprint.Throttled(sh.Before, sh.After, sh.WorldSize)
	if st := e.status; st != nil {
		sh.HasStatus = true
		sh.ExitCode = st.ExitCode
		sh.FailPhase, sh.FailMessage = st.Failure.Phase, safe.Cap(st.Failure.Message, safe.MaxMessage)
		if files.SafeName(st.Failure.Log) {
			sh.FailLog = st.Failure.Log
		}
	}
	return nil
}

// readFingerprint reads an execution's fingerprint-<phase>.json (nil when it has none or
// it cannot be read: a fingerprint is evidence, never a reason to refuse a run).
func readFingerprint(ctx context.Context, dir, phase string, setAside *[]string) *fingerprint.Fingerprint {
	f, err := fingerprint.Read(ctx, filepath.Join(dir, "fingerprint-"+phase+".json"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // none taken is no evidence lost
			*setAside = append(*setAside, err.Error())
		}
		return nil
	}
	return f
}

// appendResults appends a results file's rows to dst, and takes the provenance its run
// records.
func appendResults(dst []Row, f *summary.ResultsFile, w *walked, lean bool) []Row {
	sh := &w.sh
	if f.Run.HasID {
		sh.Runs = append(sh.Runs, f.Run.ID)
	}
	host := ""
	if f.Run.Hostname != "" {
		host = strings.Clone(f.Run.Hostname) // the file's text is another file's once read
		w.hosts[host] = true
	}
	if f.Run.Version != "" {
		w.versions[f.Run.Version] = true
	}
	for _, m := range f.Run.Software {
		sh.Software[m.Key] = pyjson.Scalar(m.Value)
	}
	dst = slices.Grow(dst, len(f.Rows))
	for i := range f.Rows {
		dst = append(dst, rowOf(&f.Rows[i], sh, lean))
		dst[len(dst)-1].Index, dst[len(dst)-1].Host = i, host
	}
	return dst
}

// rowOf is one result row with its shard's facts (lean: without metrics or label).
func rowOf(r *summary.ResultRow, sh *Shard, lean bool) Row {
	row := Row{Shard: sh.ID, Cluster: sh.Cluster, Runner: sh.Runner, WorldSize: sh.WorldSize, Attempt: sh.Attempt, Peak: sh.Peak,
		Status: r.Status, Message: safe.Cap(r.Message, safe.MaxMessage), Testlist: r.Testlist, OpType: r.OpType, Backend: r.Backend, Args: r.Args, ArgsKey: r.ArgsKey}
	ms := r.Metrics
	if row.Status == "ok" && (r.OpType != "" || r.Testlist != "") { // a row of no op (ci.py's tests) has no metric to judge
		if why := invalid(ms); why != "" { // no measurement: an error, everywhere
			row.Status, row.Message, row.Invalid = "error", why, true
		}
	}
	if !lean {
		row.metrics, row.whole = ms, true // read by name if the row is kept (shown)
	}
	return row
}

// shown gives a row read whole (with its args and metrics: Args is never nil) what it
// shows, its label and its metrics by name; the run reader shows only the rows a shard
// keeps (settleShard), not every attempt's.
func shown(row *Row) {
	if !row.whole {
		return
	}
	row.ArgsLabel = row.Args.Label()
	ms := row.metrics
	row.metrics = nil
	row.Metrics = make(map[string]float64, len(ms)) // Samples is made when a row has a list
	if ms != nil {
		row.MetricOrder = make([]string, 0, len(ms))
		for i := range ms {
			m := &ms[i]
			if f, ok := m.Number(); ok {
				row.Metrics[m.Name] = f
				row.MetricOrder = append(row.MetricOrder, m.Name)
			} else if len(m.List) > 0 {
				if row.Samples == nil {
					row.Samples = map[string][]float64{}
				}
				row.Samples[m.Name] = m.List
			}
		}
	}
}

// invalid says why an ok row's metrics are no measurement (verdict.Invalid): its headline
// metric — latency_us, else the first with a direction, as Primary picks it — missing,
// not a number, not finite or not positive.
func invalid(ms summary.Metrics) string {
	var head *summary.Metric
	for i := range ms {
		if ms[i].Name == "latency_us" {
			head = &ms[i]
			break
		}
		if head == nil && DirectionOf(ms[i].Name) != Neutral {
			head = &ms[i]
		}
	}
	if head == nil {
		return verdict.Invalid("", 0, nil, false)
	}
	if head.Kind > summary.MetricFloat {
		return fmt.Sprintf("invalid measurement: %s is %s, not a number", head.Name, safe.OneLine(head.Text()))
	}
	return verdict.Invalid(head.Name, head.Value, head.Text, true)
}
