// Package export is `opx export`: a run's cases as flat CSV or JSON-lines records, one per
// requested case, from the case ledger, streamed.
//
// It is `opx export`: one flat row per requested case of a run, from the case
// ledger — its case key, testlist, op type and args, backend, cluster, world size, the
// attempt whose row is kept, status, message, tries, GPU-seconds, whether its GPU was
// throttled, and every metric — as CSV or JSON lines, for spreadsheets, pandas and
// databases; a case no attempt measured is a row of status "missing". It streams: one
// shard's rows are held at a time, so a 128,000-case run exports in the memory of its
// largest shard. CSV, whose header names every metric before the first row, reads the run
// once and spools the rows to a temporary file ($TMPDIR) until the header is known.
package export

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// Formats are the formats Write knows.
var Formats = []string{"csv", "jsonl"}

// columns are the fixed columns, before the metrics.
var columns = append([]string{"key", "shard", "attempt", "run_id", "source_sha", "started_at", "host", "testlist", "op_type", "args", "args_label", "backend", "cluster",
	"runner", "world_size", "status", "message", "tries", "gpu_seconds", "throttled", "contended"}, append(solColumns, counterColumns...)...)

// counterColumns are a counters-mode row's kernels (internal/counters): empty for timing
// rows.
var counterColumns = []string{"counter_source", "counter_kernels", "kernel_time_us", "dram_read_bytes", "dram_write_bytes", "l2_hit_pct",
	"tensor_pct", "busy_pct", "measured_vs_declared_bytes", "counter_note"}

// counted is a row's counter columns.
func counted(r *results.Row) []string {
	out := make([]string, len(counterColumns))
	c := r.Counters
	if c == nil {
		out[len(out)-1] = r.CounterProblem
		return out
	}
	g := func(x float64) string {
		if math.IsNaN(x) {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	note := ""
	ratio := ""
	if _, q, ok := r.DeclaredBytes(); ok {
		ratio = g(q)
		if q < results.CachedBelow {
			note = "moved less than half its operands' bytes: timed on cached data"
		}
	}
	return []string{c.Source, strconv.Itoa(c.Kernels), g(c.KernelTimeUS), g(c.DRAMRead), g(c.DRAMWrite), g(c.L2HitPct), g(c.TensorPct),
		g(c.BusyPct), ratio, note}
}

// solColumns are a row against its hardware's limits (sol): ok rows whose op, args and
// runner determine them.
var solColumns = []string{"flops", "bytes", "achieved_tflops", "achieved_tbps", "pct_of_compute_peak", "pct_of_bandwidth_peak",
	"intensity", "bound", "pct_of_roofline", "impossible", "work_source", "formula_diff_pct"}

// Write writes the run's rows in format to w, and returns the run's verdict
// (internal/verdict), for the command's words and exit code. A row the harness wrote as ok
// whose headline metric is no measurement is exported as an error, its message naming the
// value it had.
func Write(ctx context.Context, manifest, dir, format string, w io.Writer) (verdict.Verdict, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	var v verdict.Verdict
	var err error
	switch format {
	case "csv":
		v, err = writeCSV(ctx, manifest, dir, bw)
	case "jsonl":
		v, err = writeJSONL(ctx, manifest, dir, bw)
	default:
		return v, fmt.Errorf("unknown format %q (csv or jsonl)", format)
	}
	if err != nil {
		return v, err
	}
	return v, bw.Flush()
}

// walkAll streams the run's rows (results.Stream), then the cases no attempt measured as
// rows of status "missing", shard by shard; it returns the run's verdict.
func walkAll(ctx context.Context, manifest, dir string, rows func([]results.Row) error) (verdict.Verdict, error) {
	var run *results.Run
	err := results.Stream(ctx, manifest, dir, func(r *results.Run) { run = r }, func(_ *results.Shard, rs []results.Row) error { return rows(rs) },
		func(_ *results.Shard, cases []results.Case) error {
			var missing []results.Row
			for i := range cases {
				if c := &cases[i]; c.Status == "missing" {
					missing = append(missing, c.MissingRow())
					missing[len(missing)-1].RunID, missing[len(missing)-1].SourceSHA = run.RunID, run.SourceSHA
				}
			}
			return rows(missing)
		})
	if err != nil {
		return verdict.Verdict{}, err
	}
	return run.Ledger.Verdict(), nil
}

// writeCSV reads the run once: each row's record is written as its CSV line to a spool
// (a temporary file: the line's field count and length, then the line) with the metric
// columns known when it was read — a new metric only ever adds a column at the end — and
// once the run is read, the header (every metric) and the spooled lines, each filled out
// to the header's width with empty fields, go to w.
func writeCSV(ctx context.Context, manifest, dir string, w io.Writer) (verdict.Verdict, error) {
	spool, err := os.CreateTemp("", "opx-export-*.spool")
	if err != nil {
		return verdict.Verdict{}, fmt.Errorf("export: a spool for the rows: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	sw := bufio.NewWriterSize(spool, 256<<10)
	var metrics []string
	seen := map[string]bool{}
	var line csvLine
	v, err := walkAll(ctx, manifest, dir, func(rows []results.Row) error {
		for i := range rows {
			r := &rows[i]
			for _, m := range r.MetricOrder { // missing cases have no metrics
				if !seen[m] {
					seen[m] = true
					metrics = append(metrics, m)
				}
			}
			line.reset()
			line.row(r, metrics)
			putLine(sw, line.cells, line.b)
		}
		return nil
	})
	if err != nil {
		return v, err
	}
	if err := sw.Flush(); err != nil {
		return v, fmt.Errorf("export: spooling the rows: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return v, err
	}
	line.reset()
	for _, name := range slices.Concat(columns, metrics) {
		line.text(name)
	}
	if _, err := w.Write(append(line.b, '\n')); err != nil {
		return v, err
	}
	width := len(columns) + len(metrics)
	return v, copySpool(w, spool, width)
}

// copySpool writes the spooled lines to w, each filled out to width fields: an empty
// field is written as nothing, so a comma before each one missing.
func copySpool(w io.Writer, spool io.Reader, width int) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	sr := bufio.NewReaderSize(spool, 256<<10)
	var text []byte
	for {
		fields, t, err := getLine(sr, text[:0])
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("export: reading the spooled rows: %w", err)
		}
		text = t
		bw.Write(text)
		for range width - fields {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// putLine spools a record's CSV line (without its newline): its field count, its length,
// then its bytes.
func putLine(w *bufio.Writer, fields int, text []byte) {
	var n [binary.MaxVarintLen64]byte
	w.Write(n[:binary.PutUvarint(n[:], uint64(fields))])
	w.Write(n[:binary.PutUvarint(n[:], uint64(len(text)))])
	w.Write(text) // a write error stays in w and is Flush's
}

// getLine reads back a line putLine spooled into text (io.EOF when there is none left).
func getLine(r *bufio.Reader, text []byte) (fields int, _ []byte, err error) {
	nf, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, text, err
	}
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, text, noEOF(err)
	}
	text = slices.Grow(text, int(l))[:l]
	if _, err := io.ReadFull(r, text); err != nil {
		return 0, text, noEOF(err)
	}
	return int(nf), text, nil
}

// noEOF is an end met inside a record: the spool was cut short.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// writeJSONL writes one object a row: the fixed columns (world_size and attempt as
// numbers, args as an object) and "metrics", in one pass.
func writeJSONL(ctx context.Context, manifest, dir string, w io.Writer) (verdict.Verdict, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var args json.RawMessage
	var line []byte
	return walkAll(ctx, manifest, dir, func(rows []results.Row) error {
		for i := range rows {
			if err := writeLine(w, enc, &rows[i], &line, &args); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonRecord is a row's JSON line.
type jsonRecord struct {
	Key       string             `json:"key"`
	Shard     string             `json:"shard"`
	Attempt   int                `json:"attempt"`
	RunID     string             `json:"run_id"`
	SourceSHA string             `json:"source_sha"`
	StartedAt string             `json:"started_at,omitempty"`
	Host      string             `json:"host,omitempty"`
	Testlist  string             `json:"testlist"`
	OpType    string             `json:"op_type"`
	Args      json.RawMessage    `json:"args"`
	ArgsLabel string             `json:"args_label"`
	Backend   string             `json:"backend"`
	Cluster   string             `json:"cluster"`
	Runner    string             `json:"runner"`
	WorldSize int                `json:"world_size"`
	Status    string             `json:"status"`
	Message   string             `json:"message,omitempty"`
	Tries     int                `json:"tries"`
	GPUSecs   float64            `json:"gpu_seconds"`
	Throttled string             `json:"throttled,omitempty"`
	Contended string             `json:"contended,omitempty"`
	Metrics   map[string]float64 `json:"metrics"`
	SOL       *solRecord         `json:"sol,omitempty"`
	Counters  map[string]any     `json:"counters,omitempty"`
}

// writeLine writes a row's JSON line to w: field by field (appendRecord, in line's room),
// or by enc, which writes to w, for a record with counters, its args' text copied into
// args (room used again; results.EncodeWithArgs).
func writeLine(w io.Writer, enc *json.Encoder, r *results.Row, line *[]byte, args *json.RawMessage) error {
	rec := recordOf(r)
	b, ok, err := appendRecord((*line)[:0], &rec, r.ArgsJSON())
	if err != nil {
		return err
	}
	if ok {
		*line = append(b, '\n')
		_, err := w.Write(*line)
		return err
	}
	rec.Args = *args
	err = results.EncodeWithArgs(enc, &rec, &rec.Args, r.ArgsJSON())
	*args = rec.Args
	return err
}

// recordOf is a row's JSON line but for its args.
func recordOf(r *results.Row) jsonRecord {
	metrics := r.Metrics
	if metrics == nil {
		metrics = map[string]float64{}
	}
	return jsonRecord{r.Key(), r.Shard, r.Attempt, r.RunID, r.SourceSHA, r.StartedAt, r.Host, r.Testlist, r.OpType, nil, r.ArgsLabel, r.Backend,
		r.Cluster, r.Runner, r.WorldSize, r.Status, r.Message, r.Tries, r.GPUSeconds, r.Throttled, r.Contended, metrics, solOf(r), countersOf(r)}
}

// countersOf is counted's columns as an object for JSON lines (nil for a timing row).
func countersOf(r *results.Row) map[string]any {
	if r.Counters == nil && r.CounterProblem == "" {
		return nil
	}
	out := map[string]any{}
	for i, v := range counted(r) {
		name := strings.TrimPrefix(counterColumns[i], "counter_")
		if f, err := strconv.ParseFloat(v, 64); err == nil && name != "source" && name != "note" {
			out[name] = f
		} else if v != "" {
			out[name] = v
		}
	}
	return out
}

// solOf is judged's columns as an object for JSON lines (nil when unknown).
func solOf(r *results.Row) *solRecord {
	w, j, ok := r.SOL()
	if !ok {
		return nil
	}
	rec := &solRecord{AchievedTBPS: g6(j.TBPS), AchievedTFLOPS: g6(j.TFLOPS), Bound: j.Bound, Bytes: g6(w.Bytes), FLOPs: g6(w.FLOPs),
		Impossible: j.Impossible, Intensity: g6(j.Intensity), PctBandwidth: g6(j.PctBandwidth), PctCompute: g6(j.PctCompute),
		PctRoofline: g6(j.SOL), Source: w.Source}
	if w.Source == "harness" && w.FormulaDiff != 0 {
		d := g6(w.FormulaDiff)
		rec.FormulaDiff = &d
	}
	return rec
}

// solRecord is a row's place against its limits in a JSON line: judged's columns, each
// number to the 6 significant digits the CSV writes, in the order of their names.
type solRecord struct {
	AchievedTBPS   float64  `json:"achieved_tbps"`
	AchievedTFLOPS float64  `json:"achieved_tflops"`
	Bound          string   `json:"bound,omitempty"`
	Bytes          float64  `json:"bytes"`
	FLOPs          float64  `json:"flops"`
	FormulaDiff    *float64 `json:"formula_diff_pct,omitempty"`
	Impossible     bool     `json:"impossible"`
	Intensity      float64  `json:"intensity"`
	PctBandwidth   float64  `json:"pct_of_bandwidth_peak"`
	PctCompute     float64  `json:"pct_of_compute_peak"`
	PctRoofline    float64  `json:"pct_of_roofline"`
	Source         string   `json:"work_source,omitempty"`
}

// sixDigits is a judged number as the CSV writes it: 6 significant digits.
func sixDigits(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// g6 is x as the CSV writes it, read back.
func g6(x float64) float64 {
	f, _ := strconv.ParseFloat(sixDigits(x), 64)
	return f
}
