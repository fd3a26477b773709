package results

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/verdict"
)

// LedgerSchema names the case ledger's format (docs/reference.md, "cases.json").
const LedgerSchema = "opx-cases/1"

// ledgerDoc is the case ledger as read back: cases.json.
type ledgerDoc struct {
	Schema    string       `json:"schema"`
	Cases     []caseDoc    `json:"cases"`
	RunID     string       `json:"run_id"`
	SourceSHA string       `json:"source_sha"`
	Complete  bool         `json:"complete"`
	Verdict   string       `json:"verdict"`
	Reasons   []string     `json:"reasons,omitempty"`
	Totals    totalsDoc    `json:"totals"`
	Attempts  []attemptDoc `json:"attempts"`
}

type totalsDoc struct {
	Cases             int     `json:"cases"`
	Measured          int     `json:"measured"`
	Unsupported       int     `json:"unsupported"`
	Error             int     `json:"error"`
	Missing           int     `json:"missing"`
	GPUSeconds        float64 `json:"gpu_seconds"`
	GPUHours          float64 `json:"gpu_hours"`
	FailedSeconds     float64 `json:"failed_attempts_gpu_seconds"`
	RetrySeconds      float64 `json:"retries_gpu_seconds"`
	SupersededSeconds float64 `json:"superseded_gpu_seconds"`
	PendingSeconds    float64 `json:"pending_seconds"`
	Estimated         bool    `json:"estimated"`
	Unaccounted       int     `json:"unaccounted_attempts"`
	Extra             int     `json:"extra_rows"`
}

type attemptDoc struct {
	Shard      string             `json:"shard"`
	Attempt    int                `json:"attempt"`
	Dir        string             `json:"dir"`
	Outcome    string             `json:"outcome"`
	Failure    string             `json:"failure,omitempty"`
	Cases      int                `json:"cases"`
	Rows       int                `json:"rows"`
	Accounted  bool               `json:"accounted"`
	GPUs       int                `json:"gpus"`
	Pending    float64            `json:"pending_seconds"`
	Held       float64            `json:"held_seconds"`
	GPUSeconds float64            `json:"gpu_seconds"`
	Share      float64            `json:"gpu_seconds_per_row"`
	Estimated  bool               `json:"estimated"`
	Phases     map[string]float64 `json:"phase_seconds,omitempty"`
	GrantedAt  *time.Time         `json:"granted_at,omitempty"`
	ReleasedAt *time.Time         `json:"released_at,omitempty"`
	Job        string             `json:"job,omitempty"`
	Retry      bool               `json:"retry"`
	Counted    bool               `json:"counted"`
}

type caseDoc struct {
	Key        string          `json:"key"`
	Shard      string          `json:"shard"`
	Testlist   string          `json:"testlist"`
	Op         string          `json:"op"`
	Backend    string          `json:"backend"`
	WorldSize  int             `json:"world_size"`
	Cluster    string          `json:"cluster"`
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Message    string          `json:"message,omitempty"`
	Attempt    int             `json:"attempt"`
	Tries      int             `json:"tries"`
	GPUSeconds float64         `json:"gpu_seconds"`
	Reached    bool            `json:"reached_by_newest"`
	// Contended is what contended with the kept row's measurement (another opx run, a
	// busy machine): a number not to gate on before it is measured again
	Contended string `json:"contended,omitempty"`
}

// A LedgerFile is a case ledger being written as its run is read (CoverInto): each
// shard's cases are encoded on the core that settled them and written, in manifest order,
// into the ledger's scratch file, so a 128,000-case ledger is written once and never
// held. Commit then writes what is known only at the end — the run, its verdict and
// totals, and the attempts — after the cases, and moves the file into place: renamed when
// it is beside the ledger, copied when its directory did not exist at the start. The
// scratch file is removed by Commit and Close.
type LedgerFile struct {
	path, artifacts string
	spool           *os.File
	beside          bool // the scratch file is in the ledger's directory
	bw              *bufio.Writer
	sep             string
	err             error
}

// CreateLedger starts the ledger at path; attempt directories will be written relative to
// artifacts. Nothing is created where the ledger goes until Commit: the scratch file is
// beside it when its directory exists, else in the temporary directory.
func CreateLedger(path, artifacts string) (*LedgerFile, error) {
	dir, beside := filepath.Dir(path), true
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir, beside = os.TempDir(), false
	}
	spool, err := os.CreateTemp(dir, filepath.Base(path)+".*.cases.tmp")
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	w := &LedgerFile{path: path, artifacts: artifacts, spool: spool, beside: beside, bw: bufio.NewWriterSize(spool, 256<<10)}
	fmt.Fprintf(w.bw, `{"schema":%q,"cases":[`, LedgerSchema)
	return w, nil
}

// add writes a shard's cases, encoded (appendCases).
func (w *LedgerFile) add(lines []byte) {
	if len(lines) == 0 || w.err != nil {
		return
	}
	w.bw.WriteString(w.sep)
	_, w.err = w.bw.Write(lines)
	w.sep = ","
}

// Close removes the scratch file (the ledger is left as it was unless Commit succeeded).
func (w *LedgerFile) Close() error {
	if w.spool == nil {
		return nil
	}
	w.spool.Close()
	err := os.Remove(w.spool.Name())
	w.spool = nil
	return err
}

// Commit writes the ledger l (the run read into w) to its path, atomically.
func (w *LedgerFile) Commit(l *Ledger) error {
	if w.spool == nil {
		return fmt.Errorf("writing %s: the ledger was closed", w.path)
	}
	defer w.Close()
	if w.err == nil {
		w.err = w.end(l)
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	if w.err != nil {
		return fmt.Errorf("writing %s: %w", w.spool.Name(), w.err)
	}
	if !w.beside { // from the temporary directory: copied beside the ledger, then renamed
		if _, err := w.spool.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("writing %s: %w", w.spool.Name(), err)
		}
		return files.WriteAtomicFunc(w.path, 0o644, func(out io.Writer) error {
			_, err := io.Copy(out, w.spool)
			return err
		})
	}
	if err := w.spool.Chmod(0o644); err != nil {
		return err
	}
	if err := w.spool.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", w.path, err)
	}
	if err := os.Rename(w.spool.Name(), w.path); err != nil {
		return err
	}
	w.spool = nil // it is the ledger now
	return nil
}

// end writes what follows the cases: the run, its verdict and totals, and its attempts.
func (w *LedgerFile) end(l *Ledger) error {
	t := l.Totals()
	v := l.Verdict()
	tail, err := json.Marshal(struct {
		RunID     string    `json:"run_id"`
		SourceSHA string    `json:"source_sha"`
		Complete  bool      `json:"complete"`
		Verdict   string    `json:"verdict"`
		Reasons   []string  `json:"reasons,omitempty"`
		Totals    totalsDoc `json:"totals"`
	}{l.RunID, l.SourceSHA, v.OK, v.Word(), v.Reasons, totalsDoc{Cases: t.Cases, Measured: t.Measured, Unsupported: t.Unsupported, Error: t.Error,
		Missing: t.Missing, GPUSeconds: t.GPUSeconds, GPUHours: t.GPUSeconds / 3600, FailedSeconds: t.FailedSeconds,
		RetrySeconds: t.RetrySeconds, SupersededSeconds: t.SupersededSeconds, PendingSeconds: t.PendingSeconds,
		Estimated: t.Estimated, Unaccounted: t.Unaccounted, Extra: l.Extra}})
	if err != nil {
		return err
	}
	out := w.bw
	out.WriteString("\n],")
	out.Write(tail[1 : len(tail)-1]) // its members, after the cases'
	out.WriteString(`,"attempts":[`)
	for i := range l.Attempts {
		a := &l.Attempts[i]
		dir := a.Dir
		if rel, err := filepath.Rel(w.artifacts, a.Dir); err == nil {
			dir = rel
		}
		b, err := json.Marshal(attemptDoc{Shard: a.Shard, Attempt: a.Attempt, Dir: dir, Outcome: a.Outcome, Failure: a.Failure, Cases: a.Cases,
			Rows: a.Rows, Accounted: a.Accounted, GPUs: a.GPUs, Pending: a.Pending, Held: a.Held, GPUSeconds: a.GPUSeconds,
			Share: a.Share(), Estimated: a.Estimated, Phases: a.Phases, GrantedAt: a.GrantedAt, ReleasedAt: a.ReleasedAt,
			Job: a.Job, Retry: a.Retry, Counted: a.Counted})
		if err != nil {
			return err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
		out.Write(b)
	}
	_, err = out.WriteString("\n]}\n")
	return err
}

// appendCases appends the ledger's lines of a shard's cases: each on a line of its own,
// after a newline, separated by commas.
func appendCases(dst []byte, cases []Case) ([]byte, error) {
	out := bytes.NewBuffer(dst)
	enc := json.NewEncoder(out) // json.Marshal's bytes, written where they go
	var doc caseDoc
	for i := range cases {
		c := &cases[i]
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
		doc = caseDoc{Key: c.Key, Shard: c.Shard, Testlist: c.Testlist, Op: c.Op, Backend: c.Backend, WorldSize: c.WorldSize,
			Cluster: c.Cluster, Args: doc.Args, Status: c.Status, Message: c.Message, Attempt: c.Attempt,
			Tries: c.Tries, GPUSeconds: c.GPUSeconds, Reached: c.Reached, Contended: c.Contended}
		if err := EncodeWithArgs(enc, &doc, &doc.Args, c.ArgsJSON); err != nil {
			return out.Bytes(), err
		}
		out.Truncate(out.Len() - 1) // Encode's newline
	}
	return out.Bytes(), nil
}

// EncodeWithArgs encodes v, whose field *args is given the args' JSON text argsJSON (a
// case key's, into the room *args has): encoding checks them, and args JSON has no word
// for (NaN, Infinity) are written as their text (ArgsRaw). Encode writes nothing when it
// fails.
func EncodeWithArgs(enc *json.Encoder, v any, args *json.RawMessage, argsJSON string) error {
	*args = append((*args)[:0], argsJSON...)
	err := enc.Encode(v)
	if _, isArgs := err.(*json.MarshalerError); isArgs {
		*args = ArgsRaw(argsJSON)
		err = enc.Encode(v)
	}
	return err
}

// ArgsRaw is args' JSON text (a case key's, Row.ArgsJSON) for an encoding/json document;
// args Python's grammar allows and JSON does not (NaN, Infinity) are given as their text.
func ArgsRaw(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// CaseCost is one case of an earlier run's ledger: its key, and what it cost.
type CaseCost struct {
	Key, Op    string
	Cluster    string // where it was measured
	GPUSeconds float64
	// GPUs is what its shard's allocations held (an exclusive node: all its GPUs; 0 when
	// no attempt of the shard was accounted): GPUSeconds / GPUs is the time it held them.
	GPUs int
	Done bool
}

// ReadLedgerCosts reads a cases.json for what its cases cost (opx plan --estimate-from).
func ReadLedgerCosts(ctx context.Context, path string) ([]CaseCost, error) {
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if err != nil {
		return nil, err
	}
	var doc ledgerDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a case ledger: %w", path, err)
	}
	if doc.Schema != LedgerSchema {
		return nil, fmt.Errorf("%s: not a case ledger (schema %q, want %q)", path, doc.Schema, LedgerSchema)
	}
	gpus := map[string]int{} // each shard's allocation, as its accounted attempts held it
	for _, a := range doc.Attempts {
		if a.Accounted && a.GPUs > 0 {
			gpus[a.Shard] = max(gpus[a.Shard], a.GPUs)
		}
	}
	out := make([]CaseCost, 0, len(doc.Cases))
	for _, c := range doc.Cases {
		out = append(out, CaseCost{Key: c.Key, Op: c.Op, Cluster: c.Cluster, GPUSeconds: c.GPUSeconds, GPUs: gpus[c.Shard],
			Done: verdict.OfStatus(c.Status) >= verdict.Unsupported})
	}
	return out, nil
}

// Line is the ledger in one line, for logs and step summaries: the verdict, its counts and
// reasons, and what it cost.
func (l *Ledger) Line() string {
	t := l.Totals()
	s := fmt.Sprintf("%s; %s %s-hours", l.Verdict().Line(), Hours(t.GPUSeconds), l.Unit())
	if t.FailedSeconds > 0 || t.RetrySeconds > 0 || t.SupersededSeconds > 0 {
		s += fmt.Sprintf(" (%s on failed attempts, %s on retries, %s paid twice)", Hours(t.FailedSeconds), Hours(t.RetrySeconds), Hours(t.SupersededSeconds))
	}
	if t.Estimated {
		s += ", some releases not recorded (estimated)"
	}
	if t.Unaccounted > 0 {
		s += fmt.Sprintf(", %d attempt(s) with no accounting (their cost unknown)", t.Unaccounted)
	}
	return s
}

// Hours formats GPU-seconds as GPU-hours with enough digits for a short local sweep.
func Hours(gpuSeconds float64) string {
	h := gpuSeconds / 3600
	switch {
	case h == 0:
		return "0"
	case h < 0.01:
		return fmt.Sprintf("%.5f", h)
	case h < 10:
		return fmt.Sprintf("%.3f", h)
	}
	return fmt.Sprintf("%.1f", h)
}

// Cover is a reading of a run for its coverage: the seed's shard report and the case
// ledger with every case kept, every results file of every attempt parsed once.
func Cover(ctx context.Context, manifest, artifacts string) (*Run, error) {
	var run *Run
	err := walk(ctx, manifest, artifacts, walker{keep: true, lean: true}, func(r *Run) { run = r }, func(*Shard, []Row) error { return nil })
	return run, err
}

// CoverInto is summarize's reading: Cover's, the ledger's cases written into w as they
// are settled rather than kept (w.Commit writes the ledger once the run is read).
func CoverInto(ctx context.Context, manifest, artifacts string, w *LedgerFile) (*Run, error) {
	var run *Run
	err := walk(ctx, manifest, artifacts, walker{ledger: w, lean: true}, func(r *Run) { run = r }, func(*Shard, []Row) error { return nil })
	if err == nil && w.err != nil {
		err = fmt.Errorf("writing %s: %w", w.spool.Name(), w.err)
	}
	return run, err
}

// Estimate is what a planned sweep should cost, from an earlier run's ledger.
type Estimate struct {
	Cases, Known, ByOp, ByAll int
	GPUSeconds                float64
	// From is how many of the ledger's cases priced it: those measured or answered
	// unsupported, with a cost recorded.
	From int
}

// ErrNothingToEstimate is an estimate from a ledger none of whose cases was measured (or
// answered) with a cost: a run that could not allocate, or that failed every case.
var ErrNothingToEstimate = errors.New("nothing to estimate from")

// EstimateCost prices every case of the manifest: a case the earlier ledger measured at
// what it cost there, any other at the mean cost of that ledger's cases of the same op
// (else of all its cases). A cost is the time the case held its allocation times the
// GPUs the planned shard's allocation holds (gpus_per_node × nodes: an exclusive node is
// charged whole), so a case measured on an 8-GPU node is priced at half on a 4-GPU one;
// a cost whose allocation is not recorded is taken as it was.
func EstimateCost(m *manifest.Manifest, costs []CaseCost) (Estimate, error) {
	type cost struct {
		held float64 // seconds the allocation was held for the case (GPUs known)
		gpuS float64 // GPU-seconds as recorded (GPUs unknown)
	}
	at := func(c cost, gpus int64) float64 {
		if gpus <= 0 {
			return c.held + c.gpuS // the plan names no GPUs: its shards hold one
		}
		return c.held*float64(gpus) + c.gpuS
	}
	of := func(c CaseCost) cost {
		if c.GPUs > 0 {
			return cost{held: c.GPUSeconds / float64(c.GPUs)}
		}
		return cost{gpuS: c.GPUSeconds}
	}
	mean := func(c cost, n int) cost { return cost{c.held / float64(n), c.gpuS / float64(n)} }
	byKey := map[string]cost{}
	opSum, opN := map[string]cost{}, map[string]int{}
	var all cost
	allN := 0
	for _, c := range costs {
		if c.GPUSeconds <= 0 || !c.Done {
			continue // a case in error or missing cost what it did, not what the case costs
		}
		x := of(c)
		byKey[c.Key] = x
		s := opSum[c.Op]
		opSum[c.Op] = cost{s.held + x.held, s.gpuS + x.gpuS}
		opN[c.Op]++
		all = cost{all.held + x.held, all.gpuS + x.gpuS}
		allN++
	}
	var e Estimate
	if e.From = allN; allN == 0 {
		return e, fmt.Errorf("%w: none of its %d case(s) was measured or answered with a cost recorded (a run that could not allocate, or failed every case)", ErrNothingToEstimate, len(costs))
	}
	for _, cell := range m.Cells {
		cases, err := CellCases(cell)
		if err != nil {
			return e, err
		}
		gpus := cell.GPUsPerNode * max(cell.Nodes, 1)
		for _, c := range cases {
			e.Cases++
			if x, ok := byKey[c.Key]; ok {
				e.Known++
				e.GPUSeconds += at(x, gpus)
			} else if opN[c.Op] > 0 {
				e.ByOp++
				e.GPUSeconds += at(mean(opSum[c.Op], opN[c.Op]), gpus)
			} else if allN > 0 {
				e.ByAll++
				e.GPUSeconds += at(mean(all, allN), gpus)
			}
		}
	}
	return e, nil
}

// Markdown writes the ledger for a step summary: its line, then per shard the cases
// measured and unsupported (never counted as measured), the attempts, and their GPU-hours
// (all, and on attempts that failed).
func (l *Ledger) Markdown(w io.Writer) {
	fmt.Fprintf(w, "\n### Cases and %s-hours\n\n%s.\n\n", l.Unit(), l.Line())
	fmt.Fprintf(w, "| Shard | Cases measured | Unsupported | Attempts | %s-hours | on failed attempts | waited (s) |\n", l.Unit())
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	type agg struct {
		t                 verdict.Tally
		attempts          int
		gpu, failed, wait float64
		unaccounted       bool
	}
	var order []string
	by := map[string]*agg{}
	get := func(id string) *agg {
		if by[id] == nil {
			by[id] = &agg{}
			order = append(order, id)
		}
		return by[id]
	}
	for _, s := range l.byShard {
		get(s.id).t = s.t
	}
	for _, at := range l.Attempts {
		a := get(at.Shard)
		a.attempts++
		a.gpu += at.GPUSeconds
		a.wait += at.Pending
		if !verdict.Good(at.Outcome) {
			a.failed += at.GPUSeconds
		}
		a.unaccounted = a.unaccounted || !at.Accounted
	}
	for _, id := range order {
		a := by[id]
		gpu := Hours(a.gpu)
		if a.unaccounted {
			gpu += " (some not recorded)"
		}
		fmt.Fprintf(w, "| %s | %d / %d | %d | %d | %s | %s | %.0f |\n", safe.Text(id), a.t.Measured, a.t.Cases(), a.t.Unsupported, a.attempts, gpu, Hours(a.failed), a.wait)
	}
	if aside, more := l.SetAside(); len(aside) > 0 {
		fmt.Fprintf(w, "\n**Evidence set aside** (%d: each attempt is judged without it):\n\n", len(aside)+more)
		for _, s := range aside {
			fmt.Fprintf(w, "- %s\n", safe.Markdown(s))
		}
		if more > 0 {
			fmt.Fprintf(w, "- … and %d more\n", more)
		}
	}
}

// MostSetAside is how many pieces of evidence set aside a summary lists by itself.
const MostSetAside = 20

// SetAside is the attempts' evidence that could not be read, as "shard S, attempt N:
// FILE: why", paths relative to the attempt's directory, shard order, oldest attempt
// first: the first MostSetAside of it, and how many more there are.
func (l *Ledger) SetAside() (shown []string, more int) {
	for _, a := range l.Attempts {
		for _, s := range a.SetAside {
			if len(shown) == MostSetAside {
				more++
				continue
			}
			shown = append(shown, fmt.Sprintf("shard %s, attempt %d: %s", a.Shard, a.Attempt, strings.ReplaceAll(s, a.Dir+string(filepath.Separator), "")))
		}
	}
	return shown, more
}
