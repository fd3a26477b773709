package export

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/counters"

	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/sol"
	"github.com/semianalysis/opx/internal/summary"
)

// An ok GEMM row on a known family gets its place against the limits; others get empty
// columns (the numbers are sol's, tested there).
func TestJudgedColumns(t *testing.T) {
	args, _ := summary.ParseArgs([]byte(`{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`))
	r := results.Row{OpType: "gemm", Args: args, Runner: "cluster:h100-dsxe", WorldSize: 1, Status: "ok",
		Metrics: map[string]float64{"latency_us": 412}, MetricOrder: []string{"latency_us"}}
	got := judged(&r)
	if got != "1.20259e+11,1.04858e+08,291.891,0.254509,29.5137,7.59728,1146.88,compute,29.5137,false,formula," {
		t.Errorf("judged: %s", got)
	}
	// a JSON line's "sol" holds the same numbers, names in order
	solJSON := func() string {
		b, err := json.Marshal(solOf(&r))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if s := solJSON(); s != `{"achieved_tbps":0.254509,"achieved_tflops":291.891,"bound":"compute","bytes":104858000,"flops":120259000000,"impossible":false,"intensity":1146.88,"pct_of_bandwidth_peak":7.59728,"pct_of_compute_peak":29.5137,"pct_of_roofline":29.5137,"work_source":"formula"}` {
		t.Errorf("sol object %s", s)
	}
	// the harness's own flops win, and the formula's difference is noted
	r.Metrics["flops"] = 1.5e11
	got = judged(&r)
	if !strings.HasPrefix(got, "1.5e+11,") || !strings.HasSuffix(got, ",harness,-19.8273") {
		t.Errorf("harness flops: %s", got)
	}
	if s := solJSON(); !strings.HasPrefix(s, `{"achieved_tbps":0.254509,"achieved_tflops":364.078,"bound":"compute","bytes":104858000,"flops":150000000000,"formula_diff_pct":-19.8273,"impossible":false,`) || !strings.HasSuffix(s, `"work_source":"harness"}`) {
		t.Errorf("sol object, harness flops: %s", s)
	}
	// a site's peaks (operator.peaks, recorded in execution.json) replace the family's
	site := sol.Override(sol.Peaks["h100"], &sol.Site{TFLOPS: map[string]float64{"bf16": 700}, HBM: 3})
	delete(r.Metrics, "flops")
	r.Peak = &site
	if j := strings.Split(judged(&r), ","); j[4] != "41.6987" { // 291.891 of 700
		t.Errorf("site peak: %q", j)
	}
	r.Runner, r.Peak = "local", nil
	if got := judged(&r); got != ",,,,,,,,,,," {
		t.Errorf("local runner: %q", got)
	}
}

// judged is a row's SOL cells, as its CSV line has them.
func judged(r *results.Row) string {
	var l csvLine
	l.judged(r)
	return string(l.b)
}

// A cell that a spreadsheet would run as a formula is made text; numbers stay numbers
// (issue 30: an op type "=cmd|' /C calc'!A0" was written bare); the line is the cells
// as csv.Writer writes them.
func TestCSVCellsAreNeutral(t *testing.T) {
	cells := []string{"=cmd|' /C calc'!A0", "+1+1", "-2-3", "@SUM(A1)", "\tx", "\rx", "-3.5", "+2", "1e-3", "gemm", "", "-Infinity", "=a,b", `-"q"`}
	want := []string{"'=cmd|' /C calc'!A0", "'+1+1", "'-2-3", "'@SUM(A1)", "'\tx", "'\rx", "-3.5", "+2", "1e-3", "gemm", "", "-Infinity", "'=a,b", `'-"q"`}
	var l csvLine
	for _, c := range cells {
		l.text(c)
	}
	if got, ref := string(l.b)+"\n", writerLine(want); got != ref {
		t.Errorf("line %q, want %q", got, ref)
	}
}

// writerLine is record as csv.Writer writes it.
func writerLine(record []string) string {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write(record)
	cw.Flush()
	return b.String()
}

// neutralCell is a cell as the CSV has it: marked with a leading ' when a spreadsheet
// would run it (it starts with =, +, -, @, a tab or a carriage return, and is no number).
func neutralCell(c string) string {
	if c == "" || !strings.ContainsRune("=+-@\t\r", rune(c[0])) {
		return c
	}
	if _, err := strconv.ParseFloat(c, 64); err == nil {
		return c
	}
	return "'" + c
}

// A CSV line is, cell for cell, what csv.Writer writes of the cells made neutral: text
// with quotes, commas, line breaks, leading spaces (Unicode's too), `\.`, invalid UTF-8
// and formula characters; numbers in both of their formats, NaN and infinities; integers.
func TestCSVLineIsWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	pieces := []string{"a", "Z", "0", "9", ".", "e", "-", "+", "=", "@", "'", ",", `"`, "\r", "\n", "\t", " ", "\\", `\.`,
		"\u00a0", "\u2028", "\u3000", "é", "\xff", "\xc3", "NaN", "Inf", "1e5", "gemm", "|"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 1e-7, 1e21, 123456789, 0.1, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64}
	for range 20000 {
		var l csvLine
		var ref []string
		for range 1 + rng.IntN(6) {
			switch rng.IntN(4) {
			case 0, 1:
				var b strings.Builder
				for range rng.IntN(5) {
					b.WriteString(pieces[rng.IntN(len(pieces))])
				}
				l.text(b.String())
				ref = append(ref, neutralCell(b.String()))
			case 2:
				x := floats[rng.IntN(len(floats))]
				if rng.IntN(2) == 0 {
					x = math.Float64frombits(rng.Uint64())
				}
				digits := []int{-1, 6}[rng.IntN(2)]
				l.float(x, digits)
				ref = append(ref, neutralCell(strconv.FormatFloat(x, 'g', digits, 64)))
			default:
				i := rng.IntN(2000) - 1000
				l.int(i)
				ref = append(ref, neutralCell(strconv.Itoa(i)))
			}
		}
		if l.cells != len(ref) {
			t.Fatalf("%d cells, want %d", l.cells, len(ref))
		}
		if got, want := string(l.b)+"\n", writerLine(ref); got != want {
			t.Fatalf("cells %q:\n%q\nwant\n%q", ref, got, want)
		}
	}
}

// A row's line has a cell for every column, then one for each metric asked, whatever the
// row: a timing row judged against its limits, one that is not, a counters row, a
// missing case; so a column added to columns without its cell fails here.
func TestCSVRowHasEveryColumn(t *testing.T) {
	args, _ := summary.ParseArgs([]byte(`{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`))
	judged := results.Row{OpType: "gemm", Args: args, Runner: "cluster:h100-dsxe", WorldSize: 1, Status: "ok",
		Metrics: map[string]float64{"latency_us": 412}, MetricOrder: []string{"latency_us"}}
	counted := judged
	counted.Counters = &counters.Case{Kernels: 2, KernelTimeUS: 400, Source: "ncu"}
	for i, r := range []results.Row{judged, {Status: "unsupported", Message: "a, b"}, counted, {Status: "missing"}} {
		for _, metrics := range [][]string{nil, {"latency_us", "tflops"}} {
			var l csvLine
			l.row(&r, metrics)
			if want := len(columns) + len(metrics); l.cells != want {
				t.Errorf("row %d, metrics %v: %d cells, want %d", i, metrics, l.cells, want)
			}
			recs, err := csv.NewReader(strings.NewReader(string(l.b))).ReadAll()
			if err != nil || len(recs) != 1 || len(recs[0]) != l.cells {
				t.Errorf("row %d: read back %v, %v", i, recs, err)
			}
		}
	}
}

// A spooled line comes back filled out to the header's width with empty cells, as
// csv.Writer writes the record so filled out: lines of every width, quoted cells among
// them; a spool cut short is an error.
func TestSpooledLinesAsCSV(t *testing.T) {
	records := [][]string{
		{"a", "b,c", `say "hi"`},
		{"line\nbreak", "=1+1", "", "-2", "x"},
		{"", "", ""},
		{`\.`, "\r", "tail "},
		{"1", "2", "3", "4", "5", "6"},
	}
	const width = 6
	var spool bytes.Buffer
	sw := bufio.NewWriter(&spool)
	var l csvLine
	for _, r := range records {
		l.reset()
		for _, c := range r {
			l.text(c)
		}
		putLine(sw, l.cells, l.b)
	}
	sw.Flush()
	var got bytes.Buffer
	if err := copySpool(&got, bytes.NewReader(spool.Bytes()), width); err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, r := range records {
		full := append(slices.Clone(r), make([]string, width-len(r))...)
		for i := range full {
			full[i] = neutralCell(full[i])
		}
		want += writerLine(full)
	}
	if got.String() != want {
		t.Errorf("copied:\n%q\nwant:\n%q", got.String(), want)
	}
	cut := spool.Bytes()[:spool.Len()-3]
	if err := copySpool(io.Discard, bytes.NewReader(cut), width); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("a cut spool: %v", err)
	}
}

// A row's JSON line has its args as JSON, or as their text when JSON has no word for
// them (NaN, Infinity), as ArgsRaw gives them, whatever the rows around it.
func TestJSONLinesArgs(t *testing.T) {
	var got, want bytes.Buffer
	enc, ref := json.NewEncoder(&got), json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	ref.SetEscapeHTML(false)
	var args json.RawMessage
	var line []byte
	for _, a := range []string{`{"m": 1, "x": "<&>"}`, `{"x": NaN}`, `{"y": [Infinity, -Infinity]}`, `{}`, `{"m": 2}`} {
		r := &results.Row{Testlist: "t", OpType: "gemm", ArgsKey: a, Status: "ok", Metrics: map[string]float64{"latency_us": 1}}
		if a == `{}` { // a counters row: its line is encoding/json's
			r.CounterProblem = "no kernel of the op"
		}
		if err := writeLine(&got, enc, r, &line, &args); err != nil {
			t.Fatal(err)
		}
		rec := jsonRecord{Key: r.Key(), Testlist: "t", OpType: "gemm", Args: results.ArgsRaw(a), Status: "ok", Metrics: r.Metrics, SOL: solOf(r),
			Counters: countersOf(r)}
		if err := ref.Encode(&rec); err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != want.String() {
		t.Errorf("lines:\n%s\nwant:\n%s", got.String(), want.String())
	}
	if !strings.Contains(got.String(), `"counters":{`) {
		t.Errorf("the counters row has no counters:\n%s", got.String())
	}
	if !strings.Contains(got.String(), `"args":"{\"x\": NaN}"`) {
		t.Errorf("NaN args not written as text:\n%s", got.String())
	}
}
