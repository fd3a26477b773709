package report

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/sol"
	"github.com/semianalysis/opx/internal/summary"
)

// builder gathers what the page shows of the rows, as they stream by: each row as a few
// numbers (its case, series, status, latency, throughput), the dictionaries they index,
// and the rows grouped by message. A row costs about 40 bytes here, whatever its size in
// the results file.
type builder struct {
	runDir    string            // where run.json may be: beside the manifest
	cases     map[caseKey]int32 // a case's place in caseInfo
	caseInfo  []caseInfo
	testlists dict // the cases' testlists and op types, numbered for the page
	ops       dict
	series    dict     // backend on cluster ×world size
	serFam    []string // each series' hardware family
	serOf     map[serKey]int32
	thrName   map[string]string // op type → its throughput metric (the first ok row's)
	// the rows, by column
	caseOf, seriesOf []int32
	status           []uint8 // 0 ok, 1 unsupported, 2 error, 3 other
	lat, thr         []float64
	spreads          [][3]float64 // row, lo, hi (µs) of rows with a spread
	sol, ai, tf      []float64    // % of the roofline, FLOP/byte, achieved TFLOP/s (NaN: unknown)
	attempt          []int32      // the attempt whose row the ledger kept
	gpuS             []float64    // the case's GPU-seconds over all attempts (NaN: not accounted)
	impossible       []int        // rows above 100 % of a limit
	throttled        []int        // rows whose GPUs were throttled while their attempt ran
	shared           []int        // rows measured under contention (Row.Contended)
	families         map[string]bool
	sitePeaks        map[string]sol.Peak // a family's limits as a site declared them
	msgs             map[string]map[string]*msgAgg
	counters         counterRows // counters-mode rows
}

// caseKey is a case as the page shows it: its testlist and op type by number, and its
// args label.
type caseKey struct {
	tl, op int32
	label  string
}

type caseInfo struct {
	label string
	tl, o int32 // testlist and op type by number
	size  float64
}

type serKey struct {
	backend, cluster string
	ws               int
}

type msgAgg struct {
	g        msgGroup
	shards   map[string]bool
	backends map[string]bool
}

type msgGroup struct {
	Message, Shards, Example, Backends string
	Count                              int
}

// dict numbers distinct strings in the order first seen.
type dict struct {
	index map[string]int32
	list  []string
}

func (d *dict) id(s string) (int32, bool) {
	if i, ok := d.index[s]; ok {
		return i, false
	}
	if d.index == nil {
		d.index = map[string]int32{}
	}
	d.index[s] = int32(len(d.list))
	d.list = append(d.list, s)
	return int32(len(d.list) - 1), true
}

// expect makes room for the run's cases (one per shape its shards request, per backend at
// least) and their rows (one a case, as the ledger keeps them): the case dictionary and
// the columns of a 128,000-case run are made once, not grown.
func (b *builder) expect(run *results.Run) {
	n := 0
	if run != nil && run.Summary != nil {
		for _, s := range run.Summary.Shards {
			n += s.RequestedShapes
		}
	}
	b.cases = make(map[caseKey]int32, n)
	b.caseInfo = make([]caseInfo, 0, n)
	b.caseOf, b.seriesOf, b.status = make([]int32, 0, n), make([]int32, 0, n), make([]uint8, 0, n)
	b.lat, b.thr, b.sol, b.ai, b.tf = make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	b.attempt, b.gpuS = make([]int32, 0, n), make([]float64, 0, n)
}

func newBuilder() *builder {
	return &builder{thrName: map[string]string{}, serOf: map[serKey]int32{}, families: map[string]bool{}, sitePeaks: map[string]sol.Peak{}, msgs: map[string]map[string]*msgAgg{"error": {}, "unsupported": {}}}
}

var statusCode = map[string]uint8{"ok": 0, "unsupported": 1, "error": 2, "missing": 4} // 3: any other

func (b *builder) add(r *results.Row) {
	// numbered as first seen, which for a testlist or op type is its first case's row
	tl, _ := b.testlists.id(r.Testlist)
	o, _ := b.ops.id(r.OpType)
	c, known := b.cases[caseKey{tl, o, r.ArgsLabel}]
	if !known {
		if b.cases == nil {
			b.cases = map[caseKey]int32{}
		}
		c = int32(len(b.caseInfo))
		k := caseKey{tl, o, strings.Clone(r.ArgsLabel)}
		b.cases[k] = c
		b.caseInfo = append(b.caseInfo, caseInfo{k.label, tl, o, size(r.OpType, &r.Args)})
	}
	sk := serKey{r.Backend, r.Cluster, r.WorldSize}
	s, known := b.serOf[sk]
	if !known {
		s, _ = b.series.id(r.Series())
		b.serOf[sk] = s
		b.serFam = append(b.serFam, sol.Family(r.Runner))
	}
	st, ok := statusCode[r.Status]
	if !ok {
		st = 3
	}
	lat, thr := math.NaN(), math.NaN()
	pct, ai, tf := math.NaN(), math.NaN(), math.NaN()
	if r.Status == "ok" {
		if _, j, ok := r.SOL(); ok {
			pct, ai, tf = j.SOL, j.Intensity, j.TFLOPS
			if j.Impossible {
				b.impossible = append(b.impossible, len(b.status))
			}
			b.families[sol.Family(r.Runner)] = true
			if r.Peak != nil {
				b.sitePeaks[sol.Family(r.Runner)] = *r.Peak
			}
		}
		if name, ok := r.Primary(); ok && results.DirectionOf(name) == results.Lower {
			lat = results.Micros(name, r.Metrics[name])
			if lo, hi, _, ok := r.Spread(name); ok {
				b.spreads = append(b.spreads, [3]float64{float64(len(b.status)), results.Micros(name, lo), results.Micros(name, hi)})
			}
		}
		tn, known := b.thrName[r.OpType]
		if !known {
			tn = throughputMetric(r)
			b.thrName[r.OpType] = tn
		}
		if v, ok := r.Metrics[tn]; ok && tn != "" {
			thr = v
		}
	}
	b.caseOf, b.seriesOf, b.status = append(b.caseOf, c), append(b.seriesOf, s), append(b.status, st)
	b.lat, b.thr = append(b.lat, lat), append(b.thr, thr)
	b.sol, b.ai, b.tf = append(b.sol, pct), append(b.ai, ai), append(b.tf, tf)
	gs := math.NaN()
	if r.GPUSeconds > 0 {
		gs = r.GPUSeconds
	}
	if r.Contended != "" {
		b.shared = append(b.shared, len(b.attempt))
	}
	if r.Throttled != "" {
		b.throttled = append(b.throttled, len(b.attempt))
	}
	b.attempt, b.gpuS = append(b.attempt, int32(r.Attempt)), append(b.gpuS, gs)
	b.counters.add(r)
	if groups := b.msgs[r.Status]; groups != nil {
		b.message(groups, r)
	}
}

func (b *builder) message(groups map[string]*msgAgg, r *results.Row) {
	msg := r.Message
	if msg == "" {
		msg = "(no message)"
	}
	a := groups[msg]
	if a == nil {
		a = &msgAgg{g: msgGroup{Message: msg, Example: r.Testlist + " · " + r.OpType + " " + r.ArgsLabel},
			shards: map[string]bool{}, backends: map[string]bool{}}
		groups[msg] = a
	}
	a.g.Count++
	if len(a.shards) < 6 {
		a.shards[r.Shard] = true
	}
	a.backends[r.Backend] = true
}

func throughputMetric(r *results.Row) string {
	for _, k := range r.MetricOrder {
		if results.DirectionOf(k) == results.Higher {
			return k
		}
	}
	return ""
}

// size is where a case sits on the charts' x axis: 2·m·n·k for a GEMM (its FLOPs), else
// the product of the args' positive numbers; 0 when it has none (the chart then orders
// such cases by their args).
func size(op string, args *summary.Args) float64 {
	num := func(k string) float64 { f, _ := args.Number(k); return f }
	if op == "gemm" {
		if m, n, k := num("m"), num("n"), num("k"); m > 0 && n > 0 && k > 0 {
			return 2 * m * n * k
		}
	}
	p := 0.0
	for _, f := range args.Numbers() {
		if f > 0 && !math.IsInf(f, 0) {
			if p == 0 {
				p = 1
			}
			p *= f
		}
	}
	return p
}

// summaryRow is one op type and series: its rows by status and its latency range.
type summaryRow struct {
	OpType, Series                string
	Rows, OK, Unsupported, Error  int
	Median, Fastest, Slowest, Thr string
}

func (b *builder) summary() []summaryRow {
	// each op type and series by number: op × series
	type agg struct {
		row        *summaryRow
		lats, thrs []float64
	}
	nser := len(b.series.list)
	aggs := make([]agg, len(b.ops.list)*nser)
	for i := range b.status {
		c := &b.caseInfo[b.caseOf[i]]
		a := &aggs[int(c.o)*nser+int(b.seriesOf[i])]
		if a.row == nil {
			a.row = &summaryRow{OpType: b.ops.list[c.o], Series: b.series.list[b.seriesOf[i]]}
		}
		row := a.row
		row.Rows++
		switch b.status[i] {
		case 0:
			row.OK++
		case 1:
			row.Unsupported++
		case 2:
			row.Error++
		}
		if !math.IsNaN(b.lat[i]) {
			a.lats = append(a.lats, b.lat[i])
		}
		if !math.IsNaN(b.thr[i]) {
			a.thrs = append(a.thrs, b.thr[i])
		}
	}
	var out []summaryRow
	for _, a := range aggs {
		if a.row == nil {
			continue
		}
		row := a.row
		if l := a.lats; len(l) > 0 {
			sort.Float64s(l)
			row.Median = results.FormatSeconds(median(l) / 1e6)
			row.Fastest, row.Slowest = results.FormatSeconds(l[0]/1e6), results.FormatSeconds(l[len(l)-1]/1e6)
		}
		if t := a.thrs; len(t) > 0 {
			sort.Float64s(t)
			row.Thr = results.Format(b.thrName[row.OpType], median(t))
		}
		out = append(out, *row)
	}
	slices.SortFunc(out, func(x, y summaryRow) int {
		return strings.Compare(x.OpType+"\x00"+x.Series, y.OpType+"\x00"+y.Series)
	})
	return out
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// groups are the rows of a status by message, most frequent first: the first 50, and how
// many more messages there are.
func (b *builder) groups(status string) ([]msgGroup, int) {
	var out []msgGroup
	for _, a := range b.msgs[status] {
		g := a.g
		shards := slices.Sorted(maps.Keys(a.shards))
		if len(shards) > 5 {
			shards = append(shards[:5], "…")
		}
		g.Shards = strings.Join(shards, ", ")
		g.Backends = strings.Join(slices.Sorted(maps.Keys(a.backends)), ", ")
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Message < out[j].Message
	})
	if len(out) > 50 {
		return out[:50], len(out) - 50
	}
	return out, 0
}

// data writes the JSON the page's script draws: dictionaries of cases and series, the
// throughput metric of each op type, and the rows as columns (numbers to 4 significant
// digits; null where a row has no value). The text is made in pieces (a column's chunk
// of rows, a dictionary) on every core and written to w in order, so compressing it (w)
// goes on while the next pieces are made.
func (b *builder) data(ctx context.Context, w io.Writer) error {
	caseAI := b.caseIntensity()
	head, err := json.Marshal(b.dictionaries())
	if err != nil {
		return err
	}
	p := &pieces{rows: len(b.status)}
	b.casePieces(p, caseAI)
	p.text(string(head[1 : len(head)-1]))
	b.rowPieces(p, caseAI)
	return par.Ordered(ctx, len(p.list), 0, func(_ context.Context, i int) ([]byte, error) {
		return p.list[i](nil)
	}, func(_ int, text []byte) error {
		_, err := w.Write(text)
		return err
	})
}

// pieces is the page's data as pieces of JSON text, each made when asked, in order.
type pieces struct {
	list []func(dst []byte) ([]byte, error)
	rows int // the rows a sparse column (pairs) runs over
}

// pieceRows is how many values a piece of a column holds.
const pieceRows = 8192

func (p *pieces) text(s string) {
	p.list = append(p.list, func(dst []byte) ([]byte, error) { return append(dst, s...), nil })
}

// column is n values, each v(i)'s JSON text, in chunks of rows.
func (p *pieces) column(name string, n int, v func(dst []byte, i int) []byte) {
	p.text(`,"` + name + `":[`)
	for lo := 0; lo < n; lo += pieceRows {
		p.list = append(p.list, func(dst []byte) ([]byte, error) {
			for i := lo; i < min(lo+pieceRows, n); i++ {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = v(dst, i)
			}
			return dst, nil
		})
	}
	p.text("]")
}

func (p *pieces) ints(name string, n int, v func(i int) int64) {
	p.column(name, n, func(dst []byte, i int) []byte { return strconv.AppendInt(dst, v(i), 10) })
}

func (p *pieces) floats(name string, xs []float64) {
	p.column(name, len(xs), func(dst []byte, i int) []byte { return appendNum(dst, xs[i]) })
}

// pairs is [row, v(row)] for the rows keep picks: a sparse column.
func (p *pieces) pairs(name string, keep func(i int) bool, v func(dst []byte, i int) []byte) {
	p.list = append(p.list, func(dst []byte) ([]byte, error) {
		dst = append(dst, `,"`+name+`":[`...)
		first := true
		for i := range p.rows {
			if !keep(i) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(v(append(strconv.AppendInt(append(dst, '['), int64(i), 10), ','), i), ']')
		}
		return append(dst, ']'), nil
	})
}

// casePieces is the cases, as columns: testlist and op type by number, args label, size
// and arithmetic intensity (the script makes each case's object of them).
func (b *builder) casePieces(p *pieces, caseAI []float64) {
	p.list = append(p.list, func(dst []byte) ([]byte, error) {
		tl, err := json.Marshal(b.testlists.list)
		if err != nil {
			return nil, err
		}
		ol, err := json.Marshal(b.ops.list)
		dst = append(append(append(append(dst, `{"cases":{"tl":`...), tl...), `,"ol":`...), ol...)
		return dst, err
	})
	nc := len(b.caseInfo)
	p.ints("t", nc, func(i int) int64 { return int64(b.caseInfo[i].tl) })
	p.ints("o", nc, func(i int) int64 { return int64(b.caseInfo[i].o) })
	p.text(`,"a":[`)
	for lo := 0; lo < nc; lo += pieceRows {
		p.list = append(p.list, func(dst []byte) ([]byte, error) {
			labels := make([]string, 0, pieceRows)
			for _, c := range b.caseInfo[lo:min(lo+pieceRows, nc)] {
				labels = append(labels, c.label)
			}
			text, err := json.Marshal(labels)
			if lo > 0 {
				dst = append(dst, ',')
			}
			return append(dst, text[1:len(text)-1]...), err
		})
	}
	p.text("]")
	p.column("x", nc, func(dst []byte, i int) []byte { return appendSize4(dst, b.caseInfo[i].size) })
	p.floats("i", caseAI)
	p.text("},")
}

// rowPieces is the rows, as columns: case, series, status, the metrics, the intensity
// where it is not its case's, the attempt and GPU-seconds (sparse), and the spreads.
func (b *builder) rowPieces(p *pieces, caseAI []float64) {
	n := len(b.status)
	p.ints("c", n, func(i int) int64 { return int64(b.caseOf[i]) })
	p.ints("s", n, func(i int) int64 { return int64(b.seriesOf[i]) })
	p.ints("st", n, func(i int) int64 { return int64(b.status[i]) })
	p.floats("lat", b.lat)
	p.floats("thr", b.thr)
	p.floats("sol", b.sol)
	// intensity is the case's (its op and args) unless the harness reported its own
	// flops or bytes: the case's in the dictionary, the rows that differ here
	ai := func(dst []byte, i int) []byte { return appendNum(dst, b.ai[i]) }
	p.pairs("aiOther", func(i int) bool {
		var row, its [32]byte
		return string(ai(row[:0], i)) != string(appendNum(its[:0], caseAI[b.caseOf[i]]))
	}, ai)
	p.floats("tf", b.tf)
	// the attempt each row is from, as the most common one and the rows of any other, and
	// each case's GPU-seconds only where recorded: sparse, as most runs have one attempt
	// and many no accounting
	count := map[int32]int{}
	var most int32
	for _, a := range b.attempt {
		if count[a]++; count[a] > count[most] {
			most = a
		}
	}
	p.text(`,"attMost":` + strconv.Itoa(int(most)))
	p.pairs("attOther", func(i int) bool { return b.attempt[i] != most },
		func(dst []byte, i int) []byte { return strconv.AppendInt(dst, int64(b.attempt[i]), 10) })
	p.pairs("gs", func(i int) bool { return !math.IsNaN(b.gpuS[i]) }, func(dst []byte, i int) []byte { return appendNum(dst, b.gpuS[i]) })
	p.list = append(p.list, func(dst []byte) ([]byte, error) {
		dst = append(dst, `,"spread":[`...)
		for i, sp := range b.spreads {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(append(dst, '['), int64(sp[0]), 10)
			dst = appendNum(append(dst, ','), sp[1])
			dst = append(appendNum(append(dst, ','), sp[2]), ']')
		}
		return append(dst, "]}"...), nil
	})
}

// packed is the page's data as its script reads it: the JSON gzip-compressed, as one
// JSON string of base64, which the browser's DecompressionStream inflates. 128,000 cases
// are 17 MB of JSON and 2 MB packed: their labels and numbers repeat.
func (b *builder) packed(ctx context.Context) (string, error) {
	var out strings.Builder
	out.WriteByte('"')
	b64 := base64.NewEncoder(base64.StdEncoding, &out)
	// klauspost/compress's gzip at level 6 (compress/gzip's default): 3.7x faster than
	// compress/gzip's, and its output 5 % smaller
	zw, err := gzip.NewWriterLevel(b64, 6)
	if err != nil {
		return "", err
	}
	if err := b.data(ctx, zw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := b64.Close(); err != nil {
		return "", err
	}
	out.WriteByte('"')
	return out.String(), nil
}

// caseIntensity is each case's arithmetic intensity: its first judged row's (NaN when none).
func (b *builder) caseIntensity() []float64 {
	out := make([]float64, len(b.caseInfo))
	for i := range out {
		out[i] = math.NaN()
	}
	for i, c := range b.caseOf {
		if math.IsNaN(out[c]) && !math.IsNaN(b.ai[i]) {
			out[c] = b.ai[i]
		}
	}
	return out
}

// dictionaries are the data's series and their families' limits, throughput metric names
// and impossible rows.
func (b *builder) dictionaries() any {
	type peakOut struct {
		TFLOPS map[string]float64 `json:"tflops"`
		HBM    float64            `json:"hbm"`
	}
	dicts := struct {
		Series     []string           `json:"series"`
		SerFamily  []string           `json:"serFamily"`
		Peaks      map[string]peakOut `json:"peaks"`
		ThrName    map[string]string  `json:"thrName"`
		Units      map[string]string  `json:"units"`
		Impossible []int              `json:"impossible"`
		Throttled  []int              `json:"throttled"`
		Shared     []int              `json:"shared"`
	}{Series: b.series.list, SerFamily: b.serFam, ThrName: map[string]string{}, Units: map[string]string{}, Peaks: map[string]peakOut{},
		Impossible: append([]int{}, b.impossible...), Throttled: append([]int{}, b.throttled...),
		Shared: append([]int{}, b.shared...)}
	for f := range b.families {
		p, site := b.sitePeaks[f]
		if !site {
			p = sol.Peaks[f]
		}
		dicts.Peaks[f] = peakOut{p.TFLOPS, p.HBM}
	}
	for op, name := range b.thrName {
		if name != "" {
			dicts.ThrName[op], dicts.Units[op] = name, results.Unit(name)
		}
	}
	return dicts
}

// appendSize4 appends a case's size (size) to 4 significant digits as JSON, 0 when it has
// none.
func appendSize4(dst []byte, x float64) []byte {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return append(dst, '0')
	}
	return appendNum(dst, x)
}

// appendNum appends x to 4 significant digits as JSON, null when it is not a number.
func appendNum(dst []byte, x float64) []byte {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, x, 'g', 4, 64)
}
