package results

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/counters"
	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/sol"
	"github.com/semianalysis/opx/internal/summary"
	"github.com/semianalysis/opx/internal/verdict"
)

// Ledger is the case-level coverage of a run across all its attempts (beyond the seed,
// whose coverage keeps only each shard's newest attempt): for every requested case the
// best row any attempt produced, which attempt produced it, what it cost, and what is
// still missing; and for every attempt what its allocation held and cost.
type Ledger struct {
	RunID, SourceSHA string
	Attempts         []Attempt // shard order, attempts oldest first
	Extra            int       // rows that are no requested case (not in the ledger)
	// Missing is the first MostMissing cases with no ok or unsupported row; MoreMissing
	// counts the rest.
	Missing     []Case
	MoreMissing int
	// CPU is whether every shard ran on the local runner: its "GPUs" are processes on this
	// machine's CPU, and its hours are said to be CPU-hours.
	CPU     bool
	tally   tally
	shards  [][]Case // each shard's cases (Cases), as the walk settles them, when kept
	byShard []shardTally
}

// shardTally is a shard's cases counted by outcome (a shard with none has none).
type shardTally struct {
	id string
	t  verdict.Tally
}

// Cases is every requested case, manifest order (cell, case, backend) — none when the run
// was read with Stream, which keeps only the totals and the first missing cases.
func (l *Ledger) Cases() iter.Seq[*Case] {
	return func(yield func(*Case) bool) {
		for _, cases := range l.shards {
			for i := range cases {
				if !yield(&cases[i]) {
					return
				}
			}
		}
	}
}

// Unit is what the run's hours are of, in the words every command uses: "GPU", or "CPU"
// for a run of the local runner.
func (l *Ledger) Unit() string {
	if l.CPU {
		return "CPU"
	}
	return "GPU"
}

// MostMissing is how many cases still to measure a ledger lists by itself.
const MostMissing = 200

// tally is the ledger's verdict and charges, kept as cases are settled: a reader that does
// not keep the cases still has the totals.
type tally struct {
	judge         verdict.Run
	charged, kept float64 // GPU-seconds charged to cases, and to the rows kept
}

// letArgsGo is a settled case letting the manifest's text of its args go: one that has
// its row needs none, one still missing keeps its own copy.
func letArgsGo(c *Case) {
	if c.Status == "missing" {
		c.argsText = bytes.Clone(c.argsText)
	} else {
		c.argsText = nil
	}
}

// add puts a shard's settled cases into the ledger: tallied, listed when missing, kept when
// keep (as the shard's own list: one list of every case would be copied as it grows).
func (l *Ledger) add(cases []Case, keep bool) {
	if len(cases) > 0 {
		l.byShard = append(l.byShard, shardTally{id: cases[0].Shard})
	}
	for i := range cases {
		c := &cases[i]
		l.byShard[len(l.byShard)-1].t.Add(c.Outcome(), 1)
		t := &l.tally
		t.judge.Case(c.Backend, c.Outcome())
		t.charged += c.GPUSeconds
		if c.Attempt > 0 {
			t.kept += c.Share
		}
		if !c.Done() {
			if len(l.Missing) < MostMissing {
				l.Missing = append(l.Missing, *c)
			} else {
				l.MoreMissing++
			}
		}
	}
	if keep {
		l.shards = append(l.shards, cases)
	}
}

// Case is one requested case: a cell's shape on one of its backends, keyed by CaseKey.
// A shape listed twice for one cell is one case.
type Case struct {
	Key, Shard                     string
	Testlist, Op, Backend, Cluster string
	Runner                         string
	WorldSize                      int
	ArgsJSON                       string // json.dumps(args, sort_keys=True): the key's own text
	// argsText is the args as the manifest writes them, which Label reads when asked: the
	// manifest's own bytes until the case is settled, then a copy for a case still
	// missing, and nothing for one that has its row (Ledger.add)
	argsText []byte
	// Status is the kept row's: ok, unsupported or error; missing when no attempt wrote one.
	Status, Message string
	Attempt         int     // the attempt whose row is kept (0: missing)
	Tries           int     // rows written for it, over all attempts
	GPUSeconds      float64 // its shares of every attempt's GPU time (see Attempt.Share)
	Share           float64 // the share of the kept row's attempt: what the kept row cost
	// Reached is whether the shard's newest attempt wrote a row for it: a case kept from an
	// older attempt (or missing) was not reached by it.
	Reached bool
	// Contended is what contended with the kept row's measurement (Row.Contended).
	Contended string
}

// MissingRow is a case no attempt wrote a row for, as a row of status "missing" (export
// lists what is missing beside what was measured).
func (c *Case) MissingRow() Row {
	return Row{Shard: c.Shard, Testlist: c.Testlist, OpType: c.Op, Backend: c.Backend, Cluster: c.Cluster, Runner: c.Runner,
		WorldSize: c.WorldSize, ArgsKey: c.ArgsJSON, ArgsLabel: c.Label(), Status: verdict.Missing.String(), Metrics: map[string]float64{},
		GPUSeconds: c.GPUSeconds, Tries: c.Tries}
}

// Label is the case's args as a row shows them (Label), made when asked: a run's
// cases are keyed by the thousand, and only the missing ones are shown by their args.
func (c *Case) Label() string {
	a, err := summary.ParseArgs([]byte(c.argsText))
	if err != nil {
		return ""
	}
	return a.Label()
}

// Outcome is the case's verdict: measured, unsupported, error or missing.
func (c *Case) Outcome() verdict.Outcome { return verdict.OfStatus(c.Status) }

// Done is whether the case needs no rerun: measured or unsupported.
func (c *Case) Done() bool { return c.Outcome() >= verdict.Unsupported }

// Measured is when the run measured: its first allocation's grant and its last release
// (zero when no attempt recorded one) — the one answer report, compare and history give.
func (l *Ledger) Measured() (first, last time.Time) {
	if l == nil {
		return first, last
	}
	for _, a := range l.Attempts {
		if a.GrantedAt != nil && (first.IsZero() || a.GrantedAt.Before(first)) {
			first = *a.GrantedAt
		}
		if a.ReleasedAt != nil && a.ReleasedAt.After(last) {
			last = *a.ReleasedAt
		}
	}
	return first, last
}

// Attempt is one execution of a shard and what it cost (its accounting.json).
type Attempt struct {
	Shard   string
	Attempt int
	Dir     string
	// Outcome is the verdict's status of the attempt (verdict.Shard) over the cases it was
	// asked to run: success, unsupported, failed, or unfinished (no status.json: killed,
	// or still running).
	Outcome, Failure string
	Exited0          bool // its status.json says exit 0
	Cases, Rows      int  // the cases it was asked to run, and its rows of requested cases
	Accounted        bool
	GPUs             int
	Pending, Held    float64 // seconds waiting for the allocation, and holding it
	GPUSeconds       float64 // GPUs × Held
	Estimated        bool    // no release recorded: held counted to the last event recorded
	Phases           map[string]float64
	GrantedAt        *time.Time
	ReleasedAt       *time.Time
	Job              string
	Retry            bool // not the shard's first attempt
	Counted          bool // the execution summarize's shard report counts (the newest)
	// SetAside is the attempt's evidence that could not be read (a node fingerprint, a
	// counters file), each with why: the attempt is judged without it.
	SetAside []string
}

// Share is what each of the attempt's cases is charged: its GPU time shared equally by the
// rows it wrote, or, when it wrote none, by the cases it was asked to run. Every
// attempt's time is charged to cases, so the cases' GPU-seconds add up to the attempts'.
func (a *Attempt) Share() float64 {
	switch {
	case a.Rows > 0:
		return a.GPUSeconds / float64(a.Rows)
	case a.Cases > 0:
		return a.GPUSeconds / float64(a.Cases)
	}
	return 0
}

// Totals are the ledger's sums.
type Totals struct {
	Cases, Measured, Unsupported, Error, Missing int
	GPUSeconds                                   float64 // every attempt's allocation time
	FailedSeconds                                float64 // attempts that did not succeed
	RetrySeconds                                 float64 // attempts after a shard's first
	SupersededSeconds                            float64 // charged to rows the ledger did not keep: paid twice
	PendingSeconds                               float64
	Estimated                                    bool // some attempt's release is not recorded
	Unaccounted                                  int  // attempts without accounting.json
}

// Totals sums the ledger.
func (l *Ledger) Totals() Totals {
	v := l.tally.judge.Tally()
	t := Totals{Cases: v.Cases(), Measured: v.Measured, Unsupported: v.Unsupported, Error: v.Error, Missing: v.Missing}
	for _, a := range l.Attempts {
		t.GPUSeconds += a.GPUSeconds
		t.PendingSeconds += a.Pending
		if !verdict.Good(a.Outcome) {
			t.FailedSeconds += a.GPUSeconds
		}
		if a.Retry {
			t.RetrySeconds += a.GPUSeconds
		}
		t.Estimated = t.Estimated || a.Estimated
		if !a.Accounted {
			t.Unaccounted++
		}
	}
	t.SupersededSeconds = max(0, l.tally.charged-l.tally.kept)
	return t
}

// Verdict is the run judged (internal/verdict): success only when no case is error or
// missing, no shard failed, and every backend measured at least one case.
func (l *Ledger) Verdict() verdict.Verdict { return l.tally.judge.Verdict() }

// CaseKey is the stable case key (KeyFields, all of them): the same case in plan,
// summarize, report, compare and export, and in two runs, has the same key.
func CaseKey(testlist, op, argsJSON, backend string, worldSize int, cluster string) string {
	k, _, _ := appendCaseKey(nil, testlist, op, argsJSON, backend, int64(worldSize), cluster)
	return string(k)
}

// appendCaseKey appends the case key to dst, and says where its args' text lies in it.
func appendCaseKey[A ~string | ~[]byte](dst []byte, testlist, op string, argsJSON A, backend string, worldSize int64, cluster string) (k []byte, lo, hi int) {
	k = append(append(append(dst, testlist...), " | "...), op...)
	k = append(k, " | "...)
	lo = len(k)
	k = append(k, argsJSON...)
	hi = len(k)
	k = append(append(k, " | "...), backend...)
	k = strconv.AppendInt(append(k, " | ws="...), worldSize, 10)
	return append(append(k, " | "...), cluster...), lo, hi
}

// CellCases are a cell's requested cases, one per distinct key, in case then backend order.
func CellCases(c *manifest.Cell) ([]Case, error) {
	if len(c.Backends) == 0 && len(c.Cases) > 0 { // a case's key names its backend: ci.py's minimal cells name none
		return nil, &Unkeyed{Shard: c.ID, Why: "its cell names no backends"}
	}
	all := make([]Case, 0, len(c.Cases)*len(c.Backends))
	var buf keyBuf
	var err error
	for i := range c.Cases {
		if all, err = appendShapeCases(all, c, i, &buf); err != nil {
			return nil, err
		}
	}
	// a shape listed twice is one case: the first keeps its place
	seen := make(map[string]bool, len(all))
	out := all[:0]
	for _, k := range all {
		if !seen[k.Key] {
			seen[k.Key] = true
			out = append(out, k)
		}
	}
	clear(all[len(out):]) // what moved down is not held twice
	return out, nil
}

// Unkeyed is a shard whose cases cannot be keyed: a manifest of ci.py's minimal form
// (its own tests write one), whose cells name no backends (a case's key names one), or
// whose counted attempt's rows all carry only a status (no op to key them by). Such a shard is judged by ci.py's rule instead: its
// newest attempt's rows counted by status, a success when it exited 0 with an ok row and
// no error row (docs/verdict.md).
type Unkeyed struct{ Shard, Why string }

func (e *Unkeyed) Error() string { return "shard " + e.Shard + ": " + e.Why }

// ShapeCases are the cases of the cell's i-th shape: one per backend of the cell.
func ShapeCases(c *manifest.Cell, i int) ([]Case, error) {
	return appendShapeCases(make([]Case, 0, len(c.Backends)), c, i, &keyBuf{})
}

// keyBuf is where a cell's case keys are written before each is made a string.
type keyBuf struct{ args, key []byte }

// appendShapeCases appends the cases of the cell's i-th shape to dst. A case's ArgsJSON
// is its key's own text (one string for both), and its args' text as written is the
// manifest's own bytes until the case is settled (Ledger.add).
func appendShapeCases(dst []Case, c *manifest.Cell, i int, buf *keyBuf) ([]Case, error) {
	testlist, op, argsText, argsJSON, err := caseArgs(c.Cases[i], buf.args[:0])
	if err != nil {
		return nil, err
	}
	if argsJSON == nil {
		if len(c.Backends) == 0 && testlist == "" && op == "" { // ci.py's tests write {}
			return nil, &Unkeyed{Shard: c.ID, Why: "its cell names no backends and its cases no shapes"}
		}
		return nil, fmt.Errorf("shard %s case %d: a shape needs a type and an args object", c.ID, i)
	}
	buf.args = argsJSON
	for _, b := range c.Backends {
		k, lo, hi := appendCaseKey(buf.key[:0], testlist, op, argsJSON, b, c.WorldSize, c.Cluster)
		buf.key = k
		key := string(k)
		dst = append(dst, Case{Key: key, Shard: c.ID, Testlist: testlist, Op: op, Backend: b, Cluster: c.Cluster,
			Runner: c.Runner, WorldSize: int(c.WorldSize), ArgsJSON: key[lo:hi], argsText: argsText, Status: "missing"})
	}
	return dst, nil
}

// caseArgs is a case's testlist, its shape's type, its args' text as written and their
// key text (nil when the shape has no args object), the key appended to scratch. A case
// left as its text (an outline's) is decoded once, its args' text being the outline's own
// bytes; a built one (a manifest read whole) is written out.
func caseArgs(cs manifest.Case, scratch []byte) (testlist, op string, argsText, argsJSON []byte, err error) {
	if cs.Text == nil {
		so, _ := cs.Shape.(*pyjson.Object)
		op, _ = so.String("type")
		if args, _ := so.Object("args"); args != nil {
			argsText = pyjson.MustMarshal(args, pyjson.Default)
			argsJSON = append(scratch, pyjson.MustMarshal(args, pyjson.Identity)...)
		}
		return cs.Testlist, op, argsText, argsJSON, nil
	}
	d, err := pyjson.NewDecoder(cs.Text)
	if err != nil {
		return "", "", nil, nil, err
	}
	if d.Kind() != '{' {
		return "", "", nil, nil, d.Skip()
	}
	// a key given twice keeps its last value, as Python's does
	err = d.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "testlist":
			testlist, _, err = d.Text()
		case "shape":
			op, argsText, argsJSON = "", nil, nil
			if d.Kind() != '{' {
				return nil
			}
			err = d.Object(func(key []byte) error {
				var err error
				switch string(key) {
				case "type":
					op, _, err = d.Text()
				case "args":
					argsText, argsJSON = nil, nil
					if d.Kind() == '{' {
						argsJSON, argsText, err = d.CanonicalText(scratch[:0])
					}
				}
				return err
			})
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	return testlist, op, argsText, argsJSON, err
}

// execRows is one execution of a shard being read: what it was asked, what it cost, and
// its rows.
type execRows struct {
	ex   summary.Execution
	exe  *manifest.Execution
	att  Attempt
	rows []Row
	// throttled is why its GPUs were held down while it ran ("" when they were not)
	throttled string
	contended string // fingerprint.Contention: what measured beside it (other opx runs, a busy machine)
	started   string // when its allocation was granted (else its first fingerprint), RFC 3339
	node      string // its node, as its fingerprints name it
	before    *fingerprint.Fingerprint
	after     *fingerprint.Fingerprint
	status    *manifest.Status // status.json, nil when absent or unreadable
	statusErr error            // why status.json could not be read
	exited0   bool             // status.json says exit 0
	counters  *counters.Result // counters mode: results/counters read
}

// asked is the keys of the cases the execution was asked to run (worked out only for an
// attempt that wrote no row, whose time is shared by them).
func (e *execRows) asked(ctx context.Context) (map[string]bool, error) {
	exe, err := manifest.ReadExecution(ctx, filepath.Join(e.ex.Dir, "execution.json")) // with its cases, this time
	if err != nil {
		return nil, err
	}
	cases, err := CellCases(exe.Cell)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(e.ex.Dir, "execution.json"), err)
	}
	asks := make(map[string]bool, len(cases))
	for _, c := range cases {
		asks[c.Key] = true
	}
	return asks, nil
}

// readAttempt reads an execution's execution.json (the cases it was asked to run),
// status.json (its outcome), accounting.json (its cost) and fingerprints.
func readAttempt(ctx context.Context, shardID string, ex summary.Execution) (*execRows, error) {
	e := &execRows{ex: ex, att: Attempt{Shard: shardID, Attempt: ex.Attempt, Dir: ex.Dir, Outcome: "unfinished"}}
	exe := ex.Head // summary.Find parsed it
	e.exe = exe
	e.att.Cases = exe.Cell.NumCases * len(exe.Cell.Backends) // its distinct keys, unless a shape is listed twice
	e.before = readFingerprint(ctx, ex.Dir, "before", &e.att.SetAside)
	e.after = readFingerprint(ctx, ex.Dir, "after", &e.att.SetAside)
	if exe.Cell.Mode == "counters" {
		e.counters = counters.Read(ctx, filepath.Join(ex.Dir, "results", "counters"))
		e.att.SetAside = append(e.att.SetAside, e.counters.Problems...)
	}
	e.throttled = fingerprint.Throttled(e.before, e.after, int(exe.Cell.WorldSize)).String()
	e.contended = fingerprint.Contention(e.before, e.after, int(exe.Cell.WorldSize))
	for _, f := range []*fingerprint.Fingerprint{e.after, e.before} {
		if f != nil && f.Node != "" {
			e.node = f.Node
		}
		if f != nil && !f.TakenAt.IsZero() {
			e.started = f.TakenAt.UTC().Format(time.RFC3339)
		}
	}
	// a status.json that cannot be read fails the run only when it is the counted
	// execution's (readShard); an older attempt's is judged as not ended
	if e.status, e.statusErr = manifest.ReadStatus(ctx, filepath.Join(ex.Dir, manifest.StatusFile)); e.status != nil {
		e.exited0 = e.status.Exited0
		e.att.Exited0 = e.exited0
		e.att.Outcome = verdict.Failed // settled over its cases by settleShard
		f := e.status.Failure
		e.att.Failure = strings.TrimPrefix(f.Phase+": "+f.Message, ": ")
	}
	acct, err := manifest.ReadAccounting(ctx, filepath.Join(ex.Dir, manifest.AccountingFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if acct != nil {
		a := &e.att
		held, est := acct.Held()
		a.Accounted, a.GPUs, a.Held, a.Estimated = true, acct.GPUs, held.Seconds(), est
		a.GPUSeconds, _ = acct.GPUSeconds()
		a.Pending = acct.Pending().Seconds()
		a.GrantedAt, a.ReleasedAt, a.Job = acct.GrantedAt, acct.ReleasedAt, acct.Job
		if a.GrantedAt != nil {
			e.started = a.GrantedAt.UTC().Format(time.RFC3339)
		}
		a.Phases = map[string]float64{}
		for _, p := range acct.Phases {
			a.Phases[p.Name] = acct.PhaseSeconds(p.Name)
		}
	}
	return e, nil
}

// joinCounters gives a counters-mode row its kernels' counters, or says why it has none.
func joinCounters(r *Row, res *counters.Result) {
	if c, ok := res.Cases[r.Index]; ok {
		r.Counters = c
		return
	}
	switch {
	case len(res.Problems) > 0:
		r.CounterProblem = res.Problems[0]
	case r.Status != "ok":
		r.CounterProblem = "the op did not run (" + r.Status + ")"
	default:
		r.CounterProblem = fmt.Sprintf("no kernel in an opx%d range", r.Index)
	}
}

// settleShard decides a shard's cases from every execution read, charges each attempt's
// time to its cases, and returns the rows kept (requested order), then the rows of the
// counted execution that are no requested case.
func settleShard(ctx context.Context, cases []Case, execs []*execRows, counted string) (kept []Row, attempts []Attempt, extra []Row, err error) {
	st := &settler{cases: cases, index: make(map[string]int, len(cases)), chosen: make([]*Row, len(cases)),
		own: make([]uint8, len(cases)), reached: make([]int, 0, len(cases))}
	for i, c := range cases {
		st.index[c.Key] = i
	}
	first := 0
	for n, e := range execs {
		if n == 0 || e.ex.Attempt < first {
			first = e.ex.Attempt
		}
	}
	for _, e := range execs {
		a := &e.att
		a.Retry, a.Counted = e.ex.Attempt > first, e.ex.Dir == counted
		mine := st.rows(e)
		if err := st.charge(ctx, e, mine); err != nil {
			return nil, nil, nil, err
		}
		if e.status != nil { // it ended: the verdict over the cases it was asked to run
			var t verdict.Tally
			for _, ci := range st.reached {
				t.Add(verdict.Outcome(st.own[ci]-1), 1)
			}
			t.Add(verdict.Missing, max(0, a.Cases-len(st.reached)))
			a.Outcome = verdict.Attempt(true, e.exited0, t)
		}
		attempts = append(attempts, *a)
	}
	return st.kept(attempts), attempts, st.extra, nil
}

// settler is settleShard's work on one shard: its cases, the row chosen for each so far,
// and the attempt being read.
type settler struct {
	cases  []Case
	index  map[string]int // a case key's case
	chosen []*Row         // each case's best row so far
	// own is the attempt's best row of each case it reached (verdict.Outcome+1; 0 where it
	// reached none), reached the cases it reached in the order it did
	own     []uint8
	reached []int
	extra   []Row  // the counted execution's rows of no requested case
	scratch []byte // each row's key, looked up before it is made a string
}

// rows settles an execution's rows: each given its execution's facts and its case, the
// case's chosen row replaced when this one is better (or as good and newer). It returns
// the case of each of its rows.
func (st *settler) rows(e *execRows) (mine []int) {
	a := &e.att
	for _, ci := range st.reached {
		st.own[ci] = 0
	}
	st.reached = st.reached[:0]
	for i := range e.rows {
		r := &e.rows[i]
		r.Attempt, r.Throttled, r.Contended, r.Mode = e.ex.Attempt, e.throttled, e.contended, e.exe.Cell.Mode
		r.RunID, r.SourceSHA, r.StartedAt = e.exe.RunID, e.exe.SourceSHA, e.started
		if r.Host == "" {
			r.Host = e.node
		}
		if e.counters != nil {
			joinCounters(r, e.counters)
		}
		st.scratch, _, _ = appendCaseKey(st.scratch[:0], r.Testlist, r.OpType, r.ArgsJSON(), r.Backend, int64(r.WorldSize), r.Cluster)
		ci, ok := st.index[string(st.scratch)]
		if !ok {
			r.key, r.Extra = string(st.scratch), true
			if a.Counted {
				st.extra = append(st.extra, *r)
				shown(&st.extra[len(st.extra)-1])
			}
			continue
		}
		r.key = st.cases[ci].Key // the same text: one string for both
		mine = append(mine, ci)
		c := &st.cases[ci]
		c.Tries++
		if a.Counted {
			c.Reached = true
		}
		// a later attempt's row replaces a kept one only when it is better, or as
		// good and newer
		o := verdict.OfStatus(r.Status)
		if cur := st.chosen[ci]; cur == nil || verdict.Better(o, verdict.OfStatus(cur.Status)) || (o == verdict.OfStatus(cur.Status) && r.Attempt > cur.Attempt) {
			st.chosen[ci] = r
		}
		if st.own[ci] == 0 {
			st.reached = append(st.reached, ci)
		}
		if st.own[ci] == 0 || verdict.Better(o, verdict.Outcome(st.own[ci]-1)) {
			st.own[ci] = uint8(o) + 1
		}
	}
	e.att.Rows = len(mine)
	return mine
}

// charge shares an attempt's GPU time among the cases of its rows, or, when it wrote
// none, among the cases it was asked to run.
func (st *settler) charge(ctx context.Context, e *execRows, mine []int) error {
	a := &e.att
	if a.Rows > 0 {
		share := a.Share()
		for _, ci := range mine {
			st.cases[ci].GPUSeconds += share
		}
		return nil
	}
	if a.GPUSeconds <= 0 {
		return nil
	}
	asks, err := e.asked(ctx)
	if err != nil {
		return err
	}
	var theirs []int
	for k := range asks {
		if ci, ok := st.index[k]; ok {
			theirs = append(theirs, ci)
		}
	}
	a.Cases = len(theirs)
	for _, ci := range theirs {
		st.cases[ci].GPUSeconds += a.Share()
	}
	return nil
}

// kept is each case's chosen row, requested order, the case given its status and cost.
func (st *settler) kept(attempts []Attempt) []Row {
	n := 0
	for _, r := range st.chosen {
		if r != nil {
			n++
		}
	}
	kept := make([]Row, 0, n)
	for i, r := range st.chosen {
		if r == nil {
			continue
		}
		c := &st.cases[i]
		c.Status, c.Message, c.Attempt, c.Contended = r.Status, r.Message, r.Attempt, r.Contended
		c.Share = shareOf(attempts, r.Attempt)
		row := *r
		row.GPUSeconds, row.Tries = c.GPUSeconds, c.Tries
		shown(&row)
		kept = append(kept, row)
	}
	return kept
}

// shareOf is the share an attempt charged each of its rows.
func shareOf(attempts []Attempt, attempt int) float64 {
	for i := range attempts {
		if attempts[i].Attempt == attempt {
			return attempts[i].Share()
		}
	}
	return 0
}

// CachedBelow is the measured-to-declared bytes ratio below which a counters row is
// flagged: its kernels moved less than half of what its operands and output hold, so it
// was timed on data resident in cache.
const CachedBelow = 0.5

// DeclaredBytes is the case's own bytes (its operands and output, from sol's formulas)
// against what its kernels moved to and from device memory: measured/declared, and
// whether both are known.
func (r *Row) DeclaredBytes() (declared, ratio float64, ok bool) {
	if r.Counters == nil || math.IsNaN(r.Counters.Bytes()) {
		return 0, 0, false
	}
	w, known := sol.WorkOf(r.OpType, &r.Args, r.WorldSize)
	if !known || w.Bytes <= 0 {
		return 0, 0, false
	}
	return w.Bytes, r.Counters.Bytes() / w.Bytes, true
}
