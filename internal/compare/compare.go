// Package compare is `opx compare BASE NEW`: two runs' rows joined on the stable case
// key (testlist, op type and args, backend, world size, cluster), each case classed
// faster / slower / same / ambiguous from its headline metric and the spread the harness
// measured, so that noise is not reported as a regression.
//
// The rule, per metric with a direction (results.DirectionOf):
//   - the change is shown one way everywhere, as a speed-up: base/new for a time, new/base
//     for a throughput, so above 1 is faster; in words "1.53x faster" or "1.53x slower"
//     (the factor is the speed-up or its inverse, whichever is at least 1). A speed-up
//     within Options.Same of 1 (|speed-up - 1| < Same) is "same".
//   - when both rows carry a spread (IQR of samples, else min–max, results.Row.Spread):
//     disjoint intervals are faster or slower; overlapping ones with |g| ≥ Same are
//     "ambiguous" (a shift inside the noise).
//   - when either lacks a spread the noise is unknown: |g| ≥ Options.NoSpread is faster or
//     slower, between Same and NoSpread is ambiguous.
//
// Status changes are classes of their own: ok → not ok is "broken", not ok → ok "fixed",
// neither ok "unmeasured"; a case in one run only is "only-base" or "only-new".
//
// Cases are joined on Options.Key (default every field of the case key); Options.Base and
// Options.New keep only the rows whose fields match, so one run can be compared with
// itself across hardware or backends (--base-filter backend=vllm --new-filter
// backend=sglang --key testlist,op,args,world_size,cluster).
package compare

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

// Classes, in the order the summary lists them.
const (
	Slower     = "slower"
	Broken     = "broken"
	Impossible = "impossible" // a row above its hardware's limit: never an improvement
	Faster     = "faster"
	Fixed      = "fixed"
	Ambiguous  = "ambiguous"
	Same       = "same"
	Unmeasured = "unmeasured"
	OnlyBase   = "only-base"
	OnlyNew    = "only-new"
)

var classOrder = []string{Slower, Broken, Impossible, Faster, Fixed, Ambiguous, Same, Unmeasured, OnlyBase, OnlyNew}

// Options are the thresholds, as fractions (0.02 = 2 %), and the join.
type Options struct {
	Same     float64  `json:"same"`      // changes smaller than this are "same"
	NoSpread float64  `json:"no_spread"` // without spreads, changes at least this large are faster/slower
	Key      []string `json:"key"`       // the case-key fields the runs are joined on (nil: all)
	Base     Filter   `json:"base_filter,omitempty"`
	New      Filter   `json:"new_filter,omitempty"`
}

// Filter keeps the rows whose fields (results.Row.Field) have the given values.
type Filter map[string]string

func (f Filter) keeps(r *results.Row) bool {
	for k, v := range f {
		if r.Field(k) != v {
			return false
		}
	}
	return true
}

// DefaultOptions: 2 % and 5 %.
var DefaultOptions = Options{Same: 0.02, NoSpread: 0.05}

// Metric is one metric's comparison.
type Metric struct {
	Name      string  `json:"name"`
	Direction string  `json:"direction"`
	Base      float64 `json:"base"`
	New       float64 `json:"new"`
	Ratio     float64 `json:"ratio"`   // new / base
	Speedup   float64 `json:"speedup"` // above 1 is faster: base/new for a time, new/base for a throughput
	Change    string  `json:"change"`  // the speed-up in words: "1.53x faster", "1.53x slower"
	Class     string  `json:"class"`
	Noise     string  `json:"noise"`
	BaseLo    float64 `json:"base_lo,omitempty"`
	BaseHi    float64 `json:"base_hi,omitempty"`
	NewLo     float64 `json:"new_lo,omitempty"`
	NewHi     float64 `json:"new_hi,omitempty"`
}

// Case is one case key's comparison.
type Case struct {
	Key        string   `json:"key"`
	Testlist   string   `json:"testlist"`
	OpType     string   `json:"op_type"`
	Args       string   `json:"args"`
	Backend    string   `json:"backend"`
	Cluster    string   `json:"cluster"`
	WorldSize  int      `json:"world_size"`
	BaseStatus string   `json:"base_status,omitempty"`
	NewStatus  string   `json:"new_status,omitempty"`
	NewMessage string   `json:"new_message,omitempty"`
	Class      string   `json:"class"`
	Primary    *Metric  `json:"primary,omitempty"`
	Metrics    []Metric `json:"metrics,omitempty"`
	// PctOfRoofline is each run's row against its hardware's limits (internal/sol), when
	// judged: {"base": %, "new": %}.
	PctOfRoofline map[string]float64 `json:"pct_of_roofline,omitempty"`
}

// Side names a run.
type Side struct {
	Dir       string `json:"dir"`
	RunID     string `json:"run_id"`
	SourceSHA string `json:"source_sha"`
	Rows      int    `json:"rows"`
	Duplicate int    `json:"duplicate_keys"`
}

// Result is the whole comparison.
type Result struct {
	Base    Side           `json:"base"`
	New     Side           `json:"new"`
	Options Options        `json:"thresholds"`
	Counts  map[string]int `json:"counts"`
	// Nodes is where the two runs' nodes differ in what decides a GPU's speed (their
	// fingerprints: GPU, driver, toolkit, power limit, max SM clock, ECC, MIG);
	// Throttled counts each run's rows measured on a throttled GPU.
	Nodes     []string       `json:"node_differences"`
	Throttled map[string]int `json:"throttled_rows"`
	Cases     []Case         `json:"cases"`
}

// Compare joins and classes two runs' rows.
func Compare(base, nw *results.Run, opt Options) *Result {
	res := &Result{Options: opt, Counts: map[string]int{}, Nodes: nodeDifferences(base, nw), Throttled: map[string]int{}}
	for side, run := range map[string]*results.Run{"base": base, "new": nw} {
		for i := range run.Rows {
			if run.Rows[i].Throttled != "" {
				res.Throttled[side]++
			}
		}
	}
	if opt.Key == nil {
		opt.Key = results.KeyFields
		res.Options.Key = opt.Key
	}
	bm, bdup := index(base.Rows, opt.Key, opt.Base)
	nm, ndup := index(nw.Rows, opt.Key, opt.New)
	res.Base = Side{base.Dir, base.RunID, base.SourceSHA, len(base.Rows), bdup}
	res.New = Side{nw.Dir, nw.RunID, nw.SourceSHA, len(nw.Rows), ndup}
	keys := map[string]bool{}
	for k := range bm {
		keys[k] = true
	}
	for k := range nm {
		keys[k] = true
	}
	for k := range keys {
		b, n := bm[k], nm[k]
		ref := b
		if ref == nil {
			ref = n
		}
		c := Case{Key: k, Testlist: ref.Testlist, OpType: ref.OpType, Args: ref.ArgsLabel, Backend: ref.Backend,
			Cluster: ref.Cluster, WorldSize: ref.WorldSize}
		if b != nil {
			c.BaseStatus = b.Status
		}
		if n != nil {
			c.NewStatus, c.NewMessage = n.Status, n.Message
		}
		c.PctOfRoofline = roofline(b, n)
		switch {
		case n == nil:
			c.Class = OnlyBase
		case b == nil:
			c.Class = OnlyNew
		case b.Status == "ok" && n.Status != "ok":
			c.Class = Broken
		case b.Status != "ok" && n.Status == "ok":
			c.Class = Fixed
		case b.Status != "ok":
			c.Class = Unmeasured
		default:
			classify(&c, b, n, opt)
			if (b.Impossible || n.Impossible) && c.Primary != nil {
				c.Class = Impossible // a broken timer or cached inputs: the change means nothing
			}
		}
		res.Counts[c.Class]++
		res.Cases = append(res.Cases, c)
	}
	sort.Slice(res.Cases, func(i, j int) bool {
		a, b := res.Cases[i], res.Cases[j]
		if ra, rb := rank(a.Class), rank(b.Class); ra != rb {
			return ra < rb
		}
		if a.Primary != nil && b.Primary != nil && a.Primary.Speedup != b.Primary.Speedup {
			if a.Class == Faster {
				return a.Primary.Speedup > b.Primary.Speedup // best improvement first
			}
			return a.Primary.Speedup < b.Primary.Speedup // worst regression first
		}
		return a.Key < b.Key
	})
	return res
}

func rank(class string) int {
	for i, c := range classOrder {
		if c == class {
			return i
		}
	}
	return len(classOrder)
}

// index maps case keys to the rows the filter keeps; a key seen twice keeps the last row
// (a retried op).
func index(rows []results.Row, key []string, f Filter) (map[string]*results.Row, int) {
	m := make(map[string]*results.Row, len(rows))
	dup := 0
	for i := range rows {
		if !f.keeps(&rows[i]) || rows[i].Mode == "counters" { // profiled: its timing is the profiler's
			continue
		}
		k := rows[i].KeyOf(key)
		if _, ok := m[k]; ok {
			dup++
		}
		m[k] = &rows[i]
	}
	return m, dup
}

func classify(c *Case, b, n *results.Row, opt Options) {
	names := map[string]bool{}
	var order []string
	for _, k := range append(append([]string(nil), b.MetricOrder...), n.MetricOrder...) {
		if !names[k] && results.DirectionOf(k) != results.Neutral {
			names[k] = true
			order = append(order, k)
		}
	}
	for _, k := range order {
		bv, ok1 := b.Metrics[k]
		nv, ok2 := n.Metrics[k]
		// a change is only defined between finite values over a positive base whose ratio
		// is finite too (a base of 1e-320 made the change -Inf, which JSON cannot hold)
		if !ok1 || !ok2 || bv <= 0 || !finite(bv) || !finite(nv) || !finite((nv-bv)/bv) {
			continue
		}
		c.Metrics = append(c.Metrics, metric(k, bv, nv, b, n, opt))
	}
	prim, ok := b.Primary()
	if ok {
		for i := range c.Metrics {
			if c.Metrics[i].Name == prim {
				c.Primary = &c.Metrics[i]
			}
		}
	}
	if c.Primary == nil && len(c.Metrics) > 0 {
		c.Primary = &c.Metrics[0]
	}
	if c.Primary == nil {
		c.Class = Unmeasured
		return
	}
	c.Class = c.Primary.Class
}

func metric(name string, bv, nv float64, b, n *results.Row, opt Options) Metric {
	dir := results.DirectionOf(name)
	m := Metric{Name: name, Direction: dir.String(), Base: bv, New: nv}
	m.Ratio = nv / bv
	m.Speedup = m.Ratio
	if dir == results.Lower {
		m.Speedup = bv / nv
	}
	m.Change = Words(m.Speedup)
	g := m.Speedup - 1 // the factor above 1, signed: 1.05x faster is +0.05, 1.05x slower -0.05
	if m.Speedup < 1 {
		g = 1 - 1/m.Speedup
	}
	better, worse := Faster, Slower
	bl, bh, bhow, bok := b.Spread(name)
	nl, nh, nhow, nok := n.Spread(name)
	switch {
	case math.Abs(g) < opt.Same:
		m.Class = Same
		m.Noise = "change below " + pct(opt.Same)
	case bok && nok:
		m.BaseLo, m.BaseHi, m.NewLo, m.NewHi = bl, bh, nl, nh
		m.Noise = bhow
		if nhow != bhow {
			m.Noise = bhow + " / " + nhow
		}
		disjoint := nh < bl || nl > bh
		switch {
		case !disjoint:
			m.Class = Ambiguous
			m.Noise += ": intervals overlap"
		case g > 0:
			m.Class = better
		default:
			m.Class = worse
		}
	default:
		m.Noise = "no spread recorded"
		switch {
		case math.Abs(g) < opt.NoSpread:
			m.Class = Ambiguous
		case g > 0:
			m.Class = better
		default:
			m.Class = worse
		}
	}
	return m
}

// Words is a speed-up as the summary says it: "1.53x faster", "1.53x slower", "same" at 1.
func Words(speedup float64) string {
	switch {
	case speedup > 1:
		return fmt.Sprintf("%.2fx faster", speedup)
	case speedup < 1 && speedup > 0:
		return fmt.Sprintf("%.2fx slower", 1/speedup)
	}
	return "same"
}

func pct(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f*100), "0"), ".") + " %"
}

// roofline is each side's % of the roofline, when judged (nil when neither is).
func roofline(b, n *results.Row) map[string]float64 {
	var out map[string]float64
	for side, r := range map[string]*results.Row{"base": b, "new": n} {
		if r != nil && r.SOLPct > 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[side] = r.SOLPct
		}
	}
	return out
}

// nodeDifferences compares the nodes the two runs' shards recorded.
func nodeDifferences(base, nw *results.Run) []string {
	side := func(run *results.Run) (fingerprint.Node, bool) {
		var nodes []fingerprint.Node
		for _, s := range run.Shards {
			if f := s.Before; f != nil {
				nodes = append(nodes, f.Summary())
			} else if f := s.After; f != nil {
				nodes = append(nodes, f.Summary())
			}
		}
		return fingerprint.Merge(nodes), len(nodes) > 0
	}
	b, okB := side(base)
	n, okN := side(nw)
	if !okB || !okN {
		return []string{}
	}
	return append([]string{}, fingerprint.Differences(b, n)...)
}

// WriteJSON writes the result as one JSON document, a case a line, without holding its
// text whole: {"base", "new", "thresholds", "counts", "cases": [...]}.
func (r *Result) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	head, err := json.Marshal(struct {
		Base      Side           `json:"base"`
		New       Side           `json:"new"`
		Options   Options        `json:"thresholds"`
		Counts    map[string]int `json:"counts"`
		Nodes     []string       `json:"node_differences"`
		Throttled map[string]int `json:"throttled_rows"`
	}{r.Base, r.New, r.Options, r.Counts, r.Nodes, r.Throttled})
	if err != nil {
		return err
	}
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"cases":[`)
	for i := range r.Cases {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n")
		b, err := json.Marshal(&r.Cases[i])
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// Regressions are the cases that fail --fail-on-regression PCT: slower on the headline
// metric by a factor of at least 1 + PCT/100 (a time that grew by PCT % or more, a
// throughput that fell to 1/(1 + PCT/100) or less), broken (ok in base, not ok now), and —
// unless allowMissing — in the base but not in the new run at all (a new run whose
// harness crashed measured nothing: every case is missing, and that fails the gate).
func (r *Result) Regressions(pctLimit float64, allowMissing bool) []Case {
	var out []Case
	for _, c := range r.Cases {
		slower := c.Class == Slower && c.Primary != nil && c.Primary.Speedup > 0 && 1/c.Primary.Speedup >= 1+pctLimit/100
		if slower || c.Class == Broken || (c.Class == OnlyBase && !allowMissing) {
			out = append(out, c)
		}
	}
	return out
}

// Markdown writes the summary for a GitHub step summary: counts, then regressions worst
// first, broken cases, improvements, ambiguous ones, and cases in one run only.
func (r *Result) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## opx compare\n\n")
	fmt.Fprintf(w, "Base: `%s` (run %s, %s) · New: `%s` (run %s, %s)\n\n", r.Base.Dir, r.Base.RunID, short(r.Base.SourceSHA),
		r.New.Dir, r.New.RunID, short(r.New.SourceSHA))
	var parts []string
	for _, c := range classOrder {
		if n := r.Counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no cases"}
	}
	fmt.Fprintf(w, "**%d cases:** %s. Same = change below %s; faster/slower = outside both runs' spread (%s without a spread). Joined on %s.\n",
		len(r.Cases), strings.Join(parts, ", "), pct(r.Options.Same), pct(r.Options.NoSpread), strings.Join(r.Options.Key, ", "))
	if len(r.Nodes) > 0 {
		fmt.Fprintf(w, "\n**The runs' nodes differ** (their fingerprints): %s. A change may be the node's, not the code's.\n", strings.Join(r.Nodes, "; "))
	}
	if r.Throttled["base"]+r.Throttled["new"] > 0 {
		fmt.Fprintf(w, "\n**Throttled GPUs:** %d base and %d new row(s) were measured on a GPU that power or heat held down while its shard ran.\n", r.Throttled["base"], r.Throttled["new"])
	}
	r.table(w, "Regressions (worst first)", Slower, false)
	r.statusTable(w, "Broken: ok in base, not ok now", Broken)
	r.table(w, "Impossible: above the hardware's limit in one run (timer, cache or peak wrong)", Impossible, false)
	r.table(w, "Improvements (best first)", Faster, false)
	r.statusTable(w, "Fixed: not ok in base, ok now", Fixed)
	r.table(w, "Ambiguous: moved, but within the noise", Ambiguous, true)
	r.statusTable(w, "Only in base (missing from new)", OnlyBase)
	r.statusTable(w, "Only in new", OnlyNew)
}

func (r *Result) pick(class string) []Case {
	var out []Case
	for _, c := range r.Cases {
		if c.Class == class {
			out = append(out, c)
		}
	}
	return out
}

func (r *Result) table(w io.Writer, title, class string, folded bool) {
	cs := r.pick(class)
	if len(cs) == 0 {
		return
	}
	if folded {
		fmt.Fprintf(w, "\n<details><summary>%s (%d)</summary>\n\n", title, len(cs))
	} else {
		fmt.Fprintf(w, "\n### %s (%d)\n\n", title, len(cs))
	}
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Metric | Base | New | Change | Noise |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
	for _, c := range cs {
		p := c.Primary
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args),
			cell(c.Backend), cell(c.Cluster), c.WorldSize, p.Name, results.Format(p.Name, p.Base), results.Format(p.Name, p.New),
			p.Change, cell(p.Noise))
	}
	if folded {
		fmt.Fprintln(w, "\n</details>")
	}
}

func (r *Result) statusTable(w io.Writer, title, class string) {
	cs := r.pick(class)
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s (%d)\n\n", title, len(cs))
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Base status | New status | Message |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | --- | --- |")
	for _, c := range cs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args), cell(c.Backend),
			cell(c.Cluster), c.WorldSize, dash(c.BaseStatus), dash(c.NewStatus), cell(trunc(c.NewMessage, 160)))
	}
}

// cell escapes a markdown table cell.
func cell(s string) string {
	s = safe.Text(s)
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func trunc(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
