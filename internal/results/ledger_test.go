package results

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
)

// A run of one shard with four shapes on two backends (8 cases), written as execute
// writes it: execution.json, status.json, accounting.json and results files per attempt.
type fakeRun struct {
	t                    *testing.T
	dir, manifest, cellJ string
	shapes               []string
}

func newFakeRun(t *testing.T) *fakeRun {
	f := &fakeRun{t: t, dir: t.TempDir()}
	for i := range 4 {
		f.shapes = append(f.shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 8, "k": 8}, "sources": []}`, 16*(i+1)))
	}
	f.manifest = filepath.Join(f.dir, "operatorx-manifest.json")
	f.cellJ = f.cell(0, 1, 2, 3)
	f.write(f.manifest, `{"run_id": "9", "source_sha": "abc", "include": [`+f.cellJ+`]}`)
	return f
}

// cell is the shard's cell holding the given shapes.
func (f *fakeRun) cell(shapes ...int) string {
	var cases []string
	for _, i := range shapes {
		cases = append(cases, `{"testlist": "t", "shape": `+f.shapes[i]+`}`)
	}
	return `{"id": "s-1", "runner": "cluster:x", "cluster": "x_8x", "backends": ["torch", "vllm"], "world_size": 1,
	  "gpus_per_node": 8, "cases": [` + strings.Join(cases, ", ") + `]}`
}

func (f *fakeRun) write(path, text string) {
	f.t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// row is a results row of shape i on backend b.
type row struct {
	shape           int
	backend, status string
}

// attempt writes one execution: the shapes it was asked, its rows, its exit code (-1: no
// status.json) and an allocation of 8 GPUs held for heldS seconds (0: no accounting.json).
func (f *fakeRun) attempt(n int, asked []int, rows []row, exit int, heldS float64) {
	d := filepath.Join(f.dir, "shards", fmt.Sprintf("s-1.attempt-%d", n))
	f.write(filepath.Join(d, "execution.json"), fmt.Sprintf(`{"cell": %s, "source_sha": "abc", "run_id": "9", "attempt": "%d", "stage": "/x"}`, f.cell(asked...), n))
	if exit >= 0 {
		f.write(filepath.Join(d, "status.json"), fmt.Sprintf(`{"exit_code": %d}`, exit))
	}
	if heldS > 0 {
		t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		granted, released := t0.Add(30*time.Second), t0.Add(30*time.Second+time.Duration(heldS*float64(time.Second)))
		a := manifest.Accounting{Runner: "cluster:x", GPUs: 8, StartedAt: &t0, SubmittedAt: &t0, GrantedAt: &granted, ReleasedAt: &released}
		if err := a.Write(filepath.Join(d, manifest.AccountingFile)); err != nil {
			f.t.Fatal(err)
		}
	}
	var rs []string
	for _, r := range rows {
		var shape struct{ Args json.RawMessage }
		json.Unmarshal([]byte(f.shapes[r.shape]), &shape)
		rs = append(rs, fmt.Sprintf(`{"op": {"type": "gemm", "backend": %q, "args": %s}, "testlist": "t", "status": %q, "message": "m%d", "metrics": {"latency_us": 10}}`,
			r.backend, shape.Args, r.status, n))
	}
	f.write(filepath.Join(d, "results", "r.json"), `{"rows": [`+strings.Join(rs, ", ")+`]}`)
}

func (f *fakeRun) ledger() *Run {
	f.t.Helper()
	run, err := Cover(context.Background(), f.manifest, filepath.Join(f.dir, "shards"))
	if err != nil {
		f.t.Fatal(err)
	}
	return run
}

func TestLedgerKeepsTheBestRowOfEveryAttempt(t *testing.T) {
	f := newFakeRun(t)
	// attempt 1 (killed, 80 s on 8 GPUs): shape 0 ok on both backends, shape 1 torch
	// error, vllm ok; shape 2 torch unsupported; then the node went away
	f.attempt(1, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}, {0, "vllm", "ok"}, {1, "torch", "error"}, {1, "vllm", "ok"}, {2, "torch", "unsupported"}}, -1, 80)
	// attempt 2 (the resume: shapes 1, 2, 3; 60 s): shape 1 torch now ok, vllm error (the
	// older ok is kept), shape 2 vllm ok, shape 3 both ok — torch of shape 2 not reached
	f.attempt(2, []int{1, 2, 3}, []row{{1, "torch", "ok"}, {1, "vllm", "error"}, {2, "vllm", "ok"}, {3, "torch", "ok"}, {3, "vllm", "ok"}}, 1, 60)
	run := f.ledger()
	l := run.Ledger
	if len(casesOf(l)) != 8 || len(l.Attempts) != 2 {
		t.Fatalf("%d cases, %d attempts", len(casesOf(l)), len(l.Attempts))
	}
	want := []struct {
		status  string
		attempt int
	}{{"ok", 1}, {"ok", 1}, {"ok", 2}, {"ok", 1}, {"unsupported", 1}, {"ok", 2}, {"ok", 2}, {"ok", 2}}
	for i, c := range casesOf(l) {
		if c.Status != want[i].status || c.Attempt != want[i].attempt {
			t.Errorf("case %d (%s): %s from attempt %d, want %s from %d", i, c.Key, c.Status, c.Attempt, want[i].status, want[i].attempt)
		}
	}
	// every case has an ok or unsupported row, but the shard's newest attempt exited 1:
	// the verdict fails on the shard alone
	if v := l.Verdict(); v.OK || !v.Tally.Settled() || v.Tally.Measured != 7 || v.Tally.Unsupported != 1 || strings.Join(v.Reasons, "; ") != "1 of 1 shards did not succeed (s-1)" {
		t.Errorf("verdict %+v", v)
	}
	// the shard report counts the newest attempt's rows and, for the cases it did not
	// reach (shape 0 on both backends, shape 2 on torch), the rows attempt 1 wrote: no
	// stale counts after a resume
	if s := run.Summary.Shards[0]; s.Attempt != 2 || s.OK != 6 || s.Unsupported != 1 || s.Error != 1 || s.Status != "failed" {
		t.Errorf("shard report %+v", s)
	}
	// GPU-seconds: 640 for attempt 1 over its 5 rows, 480 for attempt 2 over its 5
	a1, a2 := l.Attempts[0], l.Attempts[1]
	if a1.GPUSeconds != 640 || a2.GPUSeconds != 480 || a1.Share() != 128 || a2.Share() != 96 || a1.Outcome != "unfinished" || a2.Outcome != "failed" || !a2.Retry {
		t.Errorf("attempts %+v %+v", a1, a2)
	}
	// shape 1 torch: an error row in 1 and an ok in 2 — charged both shares, tried twice
	if c := casesOf(l)[2]; c.GPUSeconds != 128+96 || c.Tries != 2 {
		t.Errorf("case 2: %.1f GPU-s over %d tries", c.GPUSeconds, c.Tries)
	}
	tot := l.Totals()
	sum := 0.0
	for _, c := range casesOf(l) {
		sum += c.GPUSeconds
	}
	if math.Abs(sum-1120) > 1e-9 || tot.GPUSeconds != 1120 || tot.FailedSeconds != 1120 || tot.RetrySeconds != 480 {
		t.Errorf("sum of cases %.3f, totals %+v", sum, tot)
	}
	// paid twice: the rows not kept — shape 1 torch's error (128) and vllm's error (96)
	if math.Abs(tot.SupersededSeconds-224) > 1e-9 {
		t.Errorf("superseded %.3f, want 224", tot.SupersededSeconds)
	}
	// Stream's rows are the kept ones, one per case, each with its attempt
	var kept []Row
	if err := Stream(context.Background(), f.manifest, filepath.Join(f.dir, "shards"), func(*Run) {}, func(_ *Shard, rows []Row) error {
		kept = append(kept, rows...)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 8 || kept[2].Attempt != 2 || kept[2].Status != "ok" || kept[3].Attempt != 1 || kept[2].GPUSeconds != 224 || kept[2].Tries != 2 {
		t.Errorf("rows %d: %+v", len(kept), kept)
	}
}

func TestLedgerMissingCasesAndAttemptsWithoutRows(t *testing.T) {
	f := newFakeRun(t)
	// an attempt that died before any row (100 s): its time is shared by the 8 cases asked
	f.attempt(1, []int{0, 1, 2, 3}, nil, 1, 100)
	// one without accounting.json (ci.py's, or killed before it was written)
	f.attempt(2, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}}, -1, 0)
	l := f.ledger().Ledger
	tot := l.Totals()
	if tot.Missing != 7 || tot.Measured != 1 || l.Verdict().OK || tot.Unaccounted != 1 || tot.GPUSeconds != 800 {
		t.Fatalf("totals %+v", tot)
	}
	for i, c := range casesOf(l) {
		if c.GPUSeconds != 100 {
			t.Errorf("case %d charged %.1f, want 800/8", i, c.GPUSeconds)
		}
	}
	if !strings.HasPrefix(l.Line(), "failed: 1 of 8 cases measured, 0 unsupported, 0 error, 7 missing; backend vllm measured nothing (4 missing); 1 of 1 shards did not succeed (s-1); ") || !strings.Contains(l.Line(), "1 attempt(s) with no accounting (their cost unknown)") {
		t.Errorf("line %q", l.Line())
	}
}

// The ledger is written as the run is read (CoverInto), its cases those a reading that
// keeps them (Cover) has, in order; no scratch file is left, and a ledger's reader refuses
// a file of another kind.
func TestLedgerFileRoundTrip(t *testing.T) {
	f := newFakeRun(t)
	f.attempt(1, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}, {1, "vllm", "ok"}}, 0, 36)
	run := f.ledger()
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch)
	path := filepath.Join(f.dir, "out", "cases.json") // a directory made only once it is written: the scratch file is in TMPDIR
	// commit writes the ledger as summarize does: read into it, then committed
	commit := func() *Run {
		t.Helper()
		w, err := CreateLedger(path, filepath.Join(f.dir, "shards"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := CoverInto(context.Background(), f.manifest, filepath.Join(f.dir, "shards"), w)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(r.Ledger); err != nil {
			t.Fatal(err)
		}
		return r
	}
	sr := commit()
	if sr.Ledger.Line() != run.Ledger.Line() || len(casesOf(sr.Ledger)) != 0 {
		t.Errorf("written as read: %q, %d cases kept; want %q and none", sr.Ledger.Line(), len(casesOf(sr.Ledger)), run.Ledger.Line())
	}
	costs, err := ReadLedgerCosts(context.Background(), path)
	if err != nil || len(costs) != 8 {
		t.Fatalf("%v %d", err, len(costs))
	}
	for i, c := range casesOf(run.Ledger) {
		if costs[i].Key != c.Key || costs[i].Done != c.Done() || costs[i].GPUSeconds != c.GPUSeconds {
			t.Errorf("case %d: %+v, want %s done=%v %.0f", i, costs[i], c.Key, c.Done(), c.GPUSeconds)
		}
	}
	if !costs[0].Done || costs[1].Done || costs[0].GPUSeconds != 144 {
		t.Errorf("costs %+v", costs[:2])
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"dir":"s-1.attempt-1"`) || !strings.HasPrefix(string(b), `{"schema":"opx-cases/1"`) ||
		!strings.HasSuffix(string(b), "\n]}\n") || !json.Valid(b) {
		t.Errorf("cases.json: %s", b)
	}
	if left, _ := os.ReadDir(scratch); len(left) > 0 {
		t.Errorf("scratch files left: %v", left)
	}
	// its directory exists now: the ledger is written beside it and renamed into place,
	// the same bytes, its members in the file's order (docs/reference.md)
	commit()
	again, _ := os.ReadFile(path)
	if string(again) != string(b) {
		t.Errorf("written beside the ledger:\n%s\nthrough TMPDIR:\n%s", again, b)
	}
	last := -1
	for _, m := range []string{`{"schema":`, `,"cases":[`, `,"run_id":`, `,"source_sha":`, `,"complete":`, `,"verdict":`, `,"totals":`, `,"attempts":[`} {
		at := strings.Index(string(again), m)
		if at <= last {
			t.Errorf("%s at %d, after %d: members out of the file's order", m, at, last)
		}
		last = at
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("ledger mode: %v %v", st, err)
	}
	// a ledger begun and not committed leaves the last one as it was, and no scratch file
	if w, err := CreateLedger(path, filepath.Join(f.dir, "shards")); err != nil {
		t.Fatal(err)
	} else {
		w.add([]byte("\n{\"key\":\"half\"}"))
		w.Close()
	}
	left, _ := os.ReadDir(filepath.Dir(path))
	if now, _ := os.ReadFile(path); string(now) != string(b) || len(left) != 1 {
		t.Errorf("after a ledger not committed: %d files in its directory (%v), ledger changed: %v", len(left), left, string(now) != string(b))
	}
	os.WriteFile(path, []byte(`{"schema": "other"}`), 0o644)
	if _, err := ReadLedgerCosts(context.Background(), path); err == nil || !strings.Contains(err.Error(), "not a case ledger") {
		t.Errorf("a foreign file: %v", err)
	}
}

func TestLedgerMarkdown(t *testing.T) {
	f := newFakeRun(t)
	f.attempt(1, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}}, 1, 3600)
	f.attempt(2, []int{0, 1, 2, 3}, []row{{1, "torch", "ok"}, {1, "vllm", "unsupported"}}, 0, 1800)
	var b strings.Builder
	f.ledger().Ledger.Markdown(&b)
	// 8 GPUs: 3,600 s on the first attempt, 1,800 on the second; 30 s waited each. Both
	// failed: the first exited 1, the second left 6 of the 8 cases it was asked without a row
	want := "| s-1 | 2 / 8 | 1 | 2 | 12.0 | 12.0 | 60 |\n"
	if !strings.Contains(b.String(), "### Cases and GPU-hours") || !strings.HasSuffix(b.String(), want) {
		t.Errorf("markdown:\n%s\nwant the row %q", b.String(), want)
	}
}

// Every shard's cases are keyed into the ledger in place: in manifest order, a shape listed
// twice once, each key CaseKey's with the args json.dumps(sort_keys=True) writes, its
// ArgsJSON the key's own args, and a case still missing labelled as the manifest writes
// its args (its text kept), a measured one keeping none.
func TestLedgerCasesInPlace(t *testing.T) {
	f := newFakeRun(t)
	second := `{"id": "s-2", "runner": "cluster:x", "cluster": "x_8x", "backends": ["torch"], "world_size": 2, "gpus_per_node": 8,
	  "cases": [{"testlist": "u", "shape": {"type": "gemm", "args": {
	      "n": 8,
	      "m": 1.50,
	      "a": {"z": "é", "b": [1, 2]}}}},
	    {"testlist": "u", "shape": {"type": "gemm", "args": {"m": 1.5, "n": 8, "a": {"b": [1, 2], "z": "\u00e9"}}}},
	    {"testlist": "u", "shape": {"type": "gemm", "args": {"m": 2, "n": 8}}}]}`
	f.write(f.manifest, `{"run_id": "9", "source_sha": "abc", "include": [`+f.cellJ+`, `+second+`]}`)
	f.attempt(1, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}, {1, "vllm", "unsupported"}}, 0, 0)
	l := f.ledger().Ledger
	var got []string
	for _, c := range casesOf(l) {
		if want := CaseKey(c.Testlist, c.Op, c.ArgsJSON, c.Backend, c.WorldSize, c.Cluster); c.Key != want {
			t.Errorf("key %q, want %q", c.Key, want)
		}
		if (c.Status == "missing") != (c.argsText != nil) {
			t.Errorf("%s: %s, its args' text %q", c.Key, c.Status, c.argsText)
		}
		got = append(got, c.Shard+" "+c.Backend+" "+c.ArgsJSON+" "+c.Status)
	}
	want := []string{
		`s-1 torch {"k": 8, "m": 16, "n": 8} ok`, `s-1 vllm {"k": 8, "m": 16, "n": 8} missing`,
		`s-1 torch {"k": 8, "m": 32, "n": 8} missing`, `s-1 vllm {"k": 8, "m": 32, "n": 8} unsupported`,
		`s-1 torch {"k": 8, "m": 48, "n": 8} missing`, `s-1 vllm {"k": 8, "m": 48, "n": 8} missing`,
		`s-1 torch {"k": 8, "m": 64, "n": 8} missing`, `s-1 vllm {"k": 8, "m": 64, "n": 8} missing`,
		`s-2 torch {"a": {"b": [1, 2], "z": "\u00e9"}, "m": 1.5, "n": 8} missing`,
		`s-2 torch {"m": 2, "n": 8} missing`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := casesOf(l)[8].MissingRow(); r.ArgsLabel != "n=8 m=1.5 a.z=é a.b=[1, 2]" || r.ArgsKey != casesOf(l)[8].ArgsJSON {
		t.Errorf("missing row's label %q, key %q", r.ArgsLabel, r.ArgsKey)
	}
}

// A manifest read whole (execute, resume) and read as an outline (summarize, compare) key
// the same cases, whatever the cases' text holds: a key given twice (the last wins, as in
// Python), a testlist that is not a string, args out of order or written with escapes.
func TestCellCasesWholeAndOutlineAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.json")
	text := `{"run_id": "9", "source_sha": "abc", "include": [{"id": "s-1", "runner": "cluster:x", "cluster": "x_8x",
	  "backends": ["torch", "vllm"], "world_size": 4, "gpus_per_node": 8, "cases": [
	    {"testlist": "t", "shape": {"type": "gemm", "args": {"m": 1}}, "shape": {"type": "gemm", "args": {"n": 2, "m": 1e2}}},
	    {"testlist": 7, "shape": {"args": {"s": "\u00e9\n"}, "type": "moe", "type": "attention"}},
	    {"testlist": "u", "testlist": "v", "shape": {"type": "gemm", "args": {"k": [1, {"b": 2, "a": 1}]}}}]}]}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys [3][]string
	for i, load := range []func(context.Context, string) (*manifest.Manifest, error){manifest.Load, manifest.LoadOutline, manifest.LoadIndex} {
		m, err := load(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		cell := *m.Cells[0]
		if cell.Cases, _, err = cell.ReadCases(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		cases, err := CellCases(&cell)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			keys[i] = append(keys[i], c.Key+" "+c.Label())
		}
	}
	want := []string{
		`t | gemm | {"m": 100.0, "n": 2} | torch | ws=4 | x_8x n=2 m=100.0`, `t | gemm | {"m": 100.0, "n": 2} | vllm | ws=4 | x_8x n=2 m=100.0`,
		` | attention | {"s": "\u00e9\n"} | torch | ws=4 | x_8x s=é
`, ` | attention | {"s": "\u00e9\n"} | vllm | ws=4 | x_8x s=é
`,
		`v | gemm | {"k": [1, {"a": 1, "b": 2}]} | torch | ws=4 | x_8x k=[1, {"b": 2, "a": 1}]`, `v | gemm | {"k": [1, {"a": 1, "b": 2}]} | vllm | ws=4 | x_8x k=[1, {"b": 2, "a": 1}]`,
	}
	for i, name := range []string{"whole", "outline", "index"} {
		if strings.Join(keys[i], "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(keys[i], "\n"), strings.Join(want, "\n"))
		}
	}
}

// casesOf is the ledger's cases, in order.
func casesOf(l *Ledger) []Case {
	var out []Case
	for c := range l.Cases() {
		out = append(out, *c)
	}
	return out
}

// A row from the run's reader carries the key it was settled by: the one its fields make,
// which a join on every field (compare's default) uses as it stands.
func TestStreamedRowsCarryTheirCaseKey(t *testing.T) {
	f := newFakeRun(t)
	f.attempt(1, []int{0, 1, 2, 3}, []row{{0, "torch", "ok"}, {1, "vllm", "unsupported"}, {3, "torch", "error"}}, 0, 0)
	n := 0
	err := Stream(context.Background(), f.manifest, filepath.Join(f.dir, "shards"), func(*Run) {}, func(_ *Shard, rows []Row) error {
		for i := range rows {
			r := &rows[i]
			n++
			want := CaseKey(r.Testlist, r.OpType, r.ArgsJSON(), r.Backend, r.WorldSize, r.Cluster)
			if r.key != want || r.Key() != want || r.KeyOf([]string{"cluster", "world_size", "backend", "args", "op", "testlist"}) != want {
				t.Errorf("row %d: key %q, Key %q, want %q", i, r.key, r.Key(), want)
			}
			if got := r.KeyOf([]string{"op", "backend"}); got != "gemm | "+r.Backend {
				t.Errorf("row %d: KeyOf(op, backend) %q", i, got)
			}
		}
		return nil
	}, nil)
	if err != nil || n != 3 {
		t.Fatalf("%d rows, %v", n, err)
	}
}

// A ledger line is json.Marshal's line of the case, args that JSON cannot write (NaN,
// Infinity) given as their text, whatever the cases around it.
func TestLedgerLinesAsMarshal(t *testing.T) {
	cases := []Case{
		{Key: "k1", Shard: "s", Testlist: "t", Op: "gemm", Backend: "b", WorldSize: 8, Cluster: "c", ArgsJSON: `{"m": 1, "x": "<&>"}`, Status: "ok", Attempt: 1, Tries: 1, GPUSeconds: 0.5, Reached: true},
		{Key: "k2", ArgsJSON: `{"x": NaN}`, Status: "missing"},
		{Key: "k3 <b>", ArgsJSON: `{"y": [Infinity, -Infinity]}`, Status: "error", Message: "bad \u2028 line"},
		{Key: "k4", ArgsJSON: `{}`, Status: "unsupported"},
		{Key: "k5", ArgsJSON: `{"m": 1e400}`, Status: "ok", GPUSeconds: math.SmallestNonzeroFloat64},
	}
	got, err := appendCases([]byte("head"), cases)
	if err != nil {
		t.Fatal(err)
	}
	want := "head"
	for i, c := range cases {
		b, err := json.Marshal(caseDoc{Key: c.Key, Shard: c.Shard, Testlist: c.Testlist, Op: c.Op, Backend: c.Backend, WorldSize: c.WorldSize,
			Cluster: c.Cluster, Args: ArgsRaw(c.ArgsJSON), Status: c.Status, Message: c.Message, Attempt: c.Attempt,
			Tries: c.Tries, GPUSeconds: c.GPUSeconds, Reached: c.Reached})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			want += ","
		}
		want += "\n" + string(b)
	}
	if string(got) != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(want, `"args":"{\"x\": NaN}"`) || !strings.Contains(want, `"args":{"m":1,"x":"\u003c\u0026\u003e"}`) {
		t.Errorf("the reference is not what it should be: %s", want)
	}
}
