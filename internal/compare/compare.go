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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/verdict"
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
	below    string   // "change below <Same>", the noise of every "same" metric: set by Join, which every case is built from
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
	PctOfRoofline *Roofline `json:"pct_of_roofline,omitempty"`
}

// Roofline is each run's % of the roofline; a side not judged has none (0, left out).
type Roofline struct {
	Base float64 `json:"base,omitempty"`
	New  float64 `json:"new,omitempty"`
}

// Side names a run.
type Side struct {
	Dir       string `json:"dir"`
	RunID     string `json:"run_id"`
	SourceSHA string `json:"source_sha"`
	// At is when the run measured: its first allocation (RFC 3339, UTC; "" when it
	// recorded none).
	At        string `json:"at,omitempty"`
	Rows      int    `json:"rows"`
	Duplicate int    `json:"duplicate_keys"`
	// Measured is how many of its cases, after its filter and the join, are measured
	// (internal/verdict): a side with none cannot be compared, and fails compare.
	Measured int `json:"measured"`
	// IgnoredSpreads counts its metrics whose recorded spread could not be one (inverted,
	// below zero, not containing the value): judged as having none.
	IgnoredSpreads int `json:"ignored_spreads"`
}

// label names a side's run in the Markdown: its id, source SHA and time, each labelled
// ("run local, source unknown, measured 2026-12-06 03:13 UTC").
func (s Side) label() string {
	l := "run " + safe.Markdown(s.RunID) + ", source " + safe.Markdown(short(s.SourceSHA))
	if t, err := time.Parse(time.RFC3339, s.At); err == nil {
		l += ", measured " + t.UTC().Format("2006-01-02 15:04 UTC")
	}
	return l
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
	// Problems are why the comparison cannot be trusted, one line each: a side with no
	// measured case after its filter, a join key that is not unique in a run. compare
	// fails on the first kind always, and the gate on any. Warnings are what was set
	// aside (spreads that cannot be one).
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
	empty    bool
	cases    []joined // WriteJSON writes them as "cases", each built again (Case)
}

// Run is one side of a comparison as compare keeps it: for each case the filter keeps,
// joined on the key, what classing and showing it needs — its group (testlist, op,
// backend, cluster, world size, shared by a shard's rows), args label, status, message,
// headline metric and directional metrics with their spreads, worked out once from the
// row — and not the row itself, whose maps, args tree and key texts are three times that.
type Run struct {
	Side
	key       []string
	keep      Filter
	keys      *keyIDs // the join keys' numbers, shared with the other side when read with it
	at        []int32 // by key number: its index in rows, plus 1 (0: not in this side)
	ids       []int32 // by index in rows: its key number
	rows      []entry
	groups    map[group]*group
	throttled int
	profiled  int              // rows of a profiled execution (counters mode): left out
	node      fingerprint.Node // the run's nodes merged, when it recorded any
	hasNode   bool
	// present is every value each filtered field has among the run's rows (at most
	// mostValues each), for the message when the filter keeps nothing measured;
	// dupKey and spread are the first duplicate join key and ignored spread.
	present       map[string]map[string]bool
	dupKey        string
	spreadExample string
}

// mostValues is how many values of a filtered field a run remembers.
const mostValues = 20

// entry is one case of one run. Its status, headline metric and metrics' names are
// words (the vocabulary's numbers), and its metrics hold no pointer: 128,000 entries a
// side are what compare holds, and what the collector walks.
type entry struct {
	*group
	label, message string
	status         word
	primary        word // the headline metric (none: 0, the empty word)
	impossible     bool
	metrics        []value
	solPct         float64 // % of the roofline, when judged
}

type group struct {
	testlist, op, backend, cluster string
	ws                             int
}

// value is one directional metric with its spread (how is the empty word when it has
// none).
type value struct {
	name, how word
	v, lo, hi float64
}

// A word is one of the few distinct strings that many rows repeat — statuses, metric
// names, kinds of spread — as its number in the vocabulary of every comparison in the
// process; 0 is the empty string.
type word uint32

// vocab numbers words as rows bring them (one Read at a time adds; Join and its output
// read from every core): a reader takes the list as published, which only grows. It
// starts with the empty word (0) and "ok" (okWord).
var vocab = func() *vocabulary {
	v := &vocabulary{ids: map[string]word{"": 0, "ok": okWord}}
	v.list.Store(&[]string{"", "ok"})
	return v
}()

type vocabulary struct {
	mu   sync.Mutex
	ids  map[string]word
	list atomic.Pointer[[]string]
}

// okWord is the status of a measured row.
const okWord word = 1

// wordOf is s's word, numbered when it is new.
func wordOf(s string) word {
	vocab.mu.Lock()
	defer vocab.mu.Unlock()
	w, ok := vocab.ids[s]
	if !ok {
		list := append(*vocab.list.Load(), s)
		w = word(len(list) - 1)
		vocab.ids[s] = w
		vocab.list.Store(&list)
	}
	return w
}

// String is the word's text.
func (w word) String() string { return (*vocab.list.Load())[w] }

// newRun is an empty side joined on key (nil: every field of the case key) and keeping
// the rows keep keeps.
func newRun(key []string, keep Filter) *Run {
	if key == nil {
		key = results.KeyFields
	}
	return &Run{key: key, keep: keep, keys: &keyIDs{index: map[string]int32{}}, groups: map[group]*group{}}
}

// Read streams the run in dir (its manifest given, or the one found in dir) into a Run,
// a shard at a time: what it holds is the compact rows, not the run's.
func Read(ctx context.Context, dir, manifest string, key []string, keep Filter) (*Run, error) {
	out := newRun(key, keep)
	return out, read(ctx, dir, manifest, out)
}

// ReadNew reads the other side of a comparison with base (the same join; the new run's
// filter keep), its keys numbered with base's.
func ReadNew(ctx context.Context, base *Run, dir, manifest string, keep Filter) (*Run, error) {
	out := newRun(base.key, keep)
	out.groups, out.keys = base.groups, base.keys
	return out, read(ctx, dir, manifest, out)
}

// ReadSame reads one run, once, as both sides of a comparison: the run compared with
// itself, across backends or hardware (the two filters), or against itself (an A/A
// check). The sides are what Read makes of each.
func ReadSame(ctx context.Context, dir, manifest string, key []string, base, nw Filter) (*Run, *Run, error) {
	b, n := newRun(key, base), newRun(key, nw)
	n.groups, n.keys = b.groups, b.keys // one run's groups and keys
	return b, n, read(ctx, dir, manifest, b, n)
}

// read streams the run in dir into each of outs.
func read(ctx context.Context, dir, manifest string, outs ...*Run) error {
	manifest, err := results.Resolve(dir, manifest, "--manifest")
	if err != nil {
		return err
	}
	var run *results.Run
	var made []judged
	err = results.Stream(ctx, manifest, dir, func(r *results.Run) { run = r }, func(_ *results.Shard, rows []results.Row) error {
		for _, out := range outs {
			if out.rows == nil { // sized once for the run's shapes: no growing copies of every entry
				n := 0
				for _, s := range run.Summary.Shards {
					n += s.RequestedShapes
				}
				out.rows, out.ids = make([]entry, 0, n), make([]int32, 0, n)
				if len(out.keys.index) == 0 {
					out.keys.index, out.keys.list = make(map[string]int32, n), make([]string, 0, n)
				}
			}
		}
		for i := range rows {
			r := &rows[i]
			_, j, ok := r.SOL()
			r.Impossible = ok && j.Impossible
			if ok {
				r.SOLPct = j.SOL
			}
		}
		made = slices.Grow(made[:0], len(rows))[:len(rows)]
		clear(made)
		for _, out := range outs {
			out.add(rows, made)
		}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	for _, out := range outs {
		out.finish(run)
	}
	return nil
}

// judged is what a row gives each side that keeps it, worked out once (ok) for them all:
// its entry, and the recorded spreads it sets aside (how many, and the first).
type judged struct {
	x       entry
	ignored int
	example string
	ok      bool
	id      int32   // its join key's number in keys
	keys    *keyIDs // the numbers id is one of (nil until numbered)
}

// keyIDs number the join keys of a comparison in the order first met: its two sides,
// read together, find their rows and are joined by number, each key hashed once.
type keyIDs struct {
	index map[string]int32
	list  []string
}

// id is the key's number.
func (d *keyIDs) id(k string) int32 {
	if i, ok := d.index[k]; ok {
		return i
	}
	d.index[k] = int32(len(d.list))
	d.list = append(d.list, k)
	return int32(len(d.list) - 1)
}

// add keeps the rows' cases; a key seen twice keeps the last row (a retried op). A row of
// a profiled execution (counters mode) is left out: its timing is the profiler's. made
// holds each row's entry once it is made, for the other sides.
func (s *Run) add(rows []results.Row, made []judged) {
	for i := range rows {
		r := &rows[i]
		s.Rows++
		if r.Throttled != "" {
			s.throttled++
		}
		for f := range s.keep {
			if s.present == nil {
				s.present = map[string]map[string]bool{}
			}
			if s.present[f] == nil {
				s.present[f] = map[string]bool{}
			}
			if len(s.present[f]) < mostValues {
				s.present[f][r.Field(f)] = true
			}
		}
		if r.Mode == "counters" {
			s.profiled++
			continue
		}
		if !s.keep.keeps(r) {
			continue
		}
		j := &made[i]
		if !j.ok {
			s.judge(r, j)
		}
		x := j.x
		s.IgnoredSpreads += j.ignored
		if s.spreadExample == "" {
			s.spreadExample = j.example
		}
		if j.keys != s.keys { // numbered once for the sides read together
			j.id, j.keys = s.keys.id(r.KeyOf(s.key)), s.keys
		}
		id := j.id
		if int(id) >= len(s.at) { // room for every key numbered so far (what is past len is zero)
			s.at = slices.Grow(s.at, len(s.keys.list)-len(s.at))[:len(s.keys.list)]
		}
		if at := s.at[id]; at > 0 {
			s.Duplicate++
			if s.dupKey == "" {
				s.dupKey = s.keys.list[id]
			}
			s.rows[at-1] = x
			continue
		}
		s.rows, s.ids = append(s.rows, x), append(s.ids, id)
		s.at[id] = int32(len(s.rows))
	}
}

// judge works out the row as compare keeps it, into j.
func (s *Run) judge(r *results.Row, j *judged) {
	g := group{intern(r.Testlist), intern(r.OpType), intern(r.Backend), intern(r.Cluster), r.WorldSize}
	gp := s.groups[g]
	if gp == nil {
		gp = &g
		s.groups[g] = gp
	}
	x := entry{group: gp, label: strings.Clone(r.ArgsLabel), status: wordOf(r.Status), message: r.Message, solPct: r.SOLPct, impossible: r.Impossible}
	if p, ok := r.Primary(); ok {
		x.primary = wordOf(p)
	}
	for _, k := range r.MetricOrder {
		v, ok := r.Metrics[k]
		if !ok || results.DirectionOf(k) == results.Neutral {
			continue
		}
		if x.metrics == nil { // room for the rest, which are mostly directional too
			x.metrics = make([]value, 0, len(r.MetricOrder))
		}
		lo, hi, how, ok := r.Spread(k)
		if !ok && how != "" { // recorded, but no spread: judged without one
			j.ignored++
			if j.example == "" {
				j.example = r.Key() + " " + k + ": " + how
			}
			how = ""
		}
		x.metrics = append(x.metrics, value{name: wordOf(k), v: v, lo: lo, hi: hi, how: wordOf(how)})
	}
	j.x, j.ok = x, true
}

// finish records what the run says of itself once its rows are in: its names and the
// nodes its shards ran on.
func (s *Run) finish(run *results.Run) {
	s.Dir, s.RunID, s.SourceSHA = run.Dir, run.RunID, run.SourceSHA
	var first time.Time
	var attempts []results.Attempt
	if run.Ledger != nil {
		attempts = run.Ledger.Attempts
	}
	for _, a := range attempts {
		if a.GrantedAt != nil && (first.IsZero() || a.GrantedAt.Before(first)) {
			first = *a.GrantedAt
		}
	}
	if !first.IsZero() {
		s.At = first.UTC().Format(time.RFC3339)
	}
	for i := range s.rows {
		if verdict.OfStatus(s.rows[i].status.String()) == verdict.Measured {
			s.Measured++
		}
	}
	var nodes []fingerprint.Node
	for _, sh := range run.Shards {
		if f := sh.Before; f != nil {
			nodes = append(nodes, f.Summary())
		} else if f := sh.After; f != nil {
			nodes = append(nodes, f.Summary())
		}
	}
	s.node, s.hasNode = fingerprint.Merge(nodes), len(nodes) > 0
}

// nothingMeasured says why the side has no measured case to compare ("" when it has):
// what its filter kept, and the values the filtered fields have in the run.
func (s *Run) nothingMeasured(side string) string {
	if s.Measured > 0 {
		return ""
	}
	var t verdict.Tally
	for i := range s.rows {
		t.Add(verdict.OfStatus(s.rows[i].status.String()), 1)
	}
	msg := fmt.Sprintf("%s: nothing measured to compare (%d rows in the run", side, s.Rows)
	if s.profiled > 0 {
		msg += fmt.Sprintf(", %d of them profiled (counters mode: timed by the profiler, left out)", s.profiled)
	}
	if len(s.keep) == 0 {
		return msg + fmt.Sprintf("; %d unsupported, %d error)", t.Unsupported, t.Error)
	}
	var filt, have []string
	for _, f := range slices.Sorted(maps.Keys(s.keep)) {
		filt = append(filt, f+"="+s.keep[f])
		vals := slices.Sorted(maps.Keys(s.present[f]))
		if len(vals) == mostValues {
			vals = append(vals, "...")
		}
		have = append(have, f+": "+strings.Join(vals, ", "))
	}
	return msg + fmt.Sprintf(", %d kept by --%s-filter %s: %d unsupported, %d error; values present: %s)",
		len(s.rows), side, strings.Join(filt, ","), t.Unsupported, t.Error, strings.Join(have, "; "))
}

// Empty is whether a side has nothing measured to compare: compare fails then, gate or
// not (a comparison of nothing is no evidence of anything).
func (r *Result) Empty() bool { return r.empty }

// intern is the one copy of a string that many rows' groups repeat (testlists, ops,
// backends, clusters); statuses and metric names are words.
func intern(s string) string { return unique.Make(s).Value() }

func (x *entry) value(name word) (value, bool) {
	for _, v := range x.metrics {
		if v.name == name {
			return v, true
		}
	}
	return value{}, false
}

// joined is one case of the comparison: its key, its rows, and what its class and order
// need; the rest of the Case is worked out again when it is shown (build).
type joined struct {
	key        string
	b, n       *entry
	class      string
	rank       int // of the class, in classOrder
	speedup    float64
	hasPrimary bool
}

// Join classes two sides' cases. opt.Key and the filters are what the sides were read
// with; Join reports them.
func Join(base, nw *Run, opt Options) *Result {
	opt.Key = base.key
	opt.below = "change below " + pct(opt.Same)
	res := &Result{Options: opt, Counts: map[string]int{}, Base: base.Side, New: nw.Side, Throttled: map[string]int{},
		Problems: []string{}, Warnings: []string{}}
	for _, sd := range []struct {
		name string
		run  *Run
	}{{"base", base}, {"new", nw}} {
		if p := sd.run.nothingMeasured(sd.name); p != "" {
			res.Problems = append(res.Problems, p)
			res.empty = true
		}
	}
	for _, sd := range []struct {
		name string
		run  *Run
	}{{"base", base}, {"new", nw}} {
		r := sd.run
		if r.Duplicate > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: the join key (%s) is not unique: %d row(s) share a key with another, e.g. %q (join on more fields with --key)",
				sd.name, strings.Join(r.key, ","), r.Duplicate, r.dupKey))
		}
		if r.IgnoredSpreads > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %d recorded spread(s) ignored, judged without one (e.g. %s)", sd.name, r.IgnoredSpreads, r.spreadExample))
		}
	}
	res.Nodes = []string{}
	if base.hasNode && nw.hasNode {
		res.Nodes = append(res.Nodes, fingerprint.Differences(base.node, nw.node)...)
	}
	for side, n := range map[string]int{"base": base.throttled, "new": nw.throttled} {
		if n > 0 {
			res.Throttled[side] = n
		}
	}
	// each base row with the new row of its key number (in the base's numbers: sides read
	// apart are numbered apart)
	nwIDs := nw.ids
	if nw.keys != base.keys {
		nwIDs = make([]int32, len(nw.ids))
		for j, id := range nw.ids {
			nwIDs[j] = base.keys.id(nw.keys.list[id])
		}
	}
	nwAt := make([]int32, len(base.keys.list))
	for j, id := range nwIDs {
		nwAt[id] = int32(j + 1)
	}
	res.cases = make([]joined, 0, max(len(base.rows), len(nw.rows)))
	paired := make([]bool, len(nw.rows))
	for i, id := range base.ids {
		var n *entry
		if j := nwAt[id]; j > 0 {
			n, paired[j-1] = &nw.rows[j-1], true
		}
		res.cases = append(res.cases, joined{key: base.keys.list[id], b: &base.rows[i], n: n})
	}
	for j, id := range nwIDs {
		if !paired[j] {
			res.cases = append(res.cases, joined{key: base.keys.list[id], n: &nw.rows[j]})
		}
	}
	// each case classed on every core, a part of the list each
	var wg sync.WaitGroup
	parts := runtime.GOMAXPROCS(0)
	for p := range parts {
		wg.Go(func() {
			var room []Metric // each case's metrics, in the room of the last
			for k := len(res.cases) * p / parts; k < len(res.cases)*(p+1)/parts; k++ {
				j := &res.cases[k]
				c := build(j.key, j.b, j.n, opt, false, room)
				j.class, j.hasPrimary = c.Class, c.Primary != nil
				if c.Primary != nil {
					j.speedup = c.Primary.Speedup
				}
				if c.Metrics != nil {
					room = c.Metrics
				}
			}
		})
	}
	wg.Wait()
	for i := range res.cases {
		res.Counts[res.cases[i].class]++
		res.cases[i].rank = rank(res.cases[i].class)
	}
	par.SortFunc(res.cases, func(a, b joined) int { // keys are unique: one order
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		if a.hasPrimary && b.hasPrimary && a.speedup != b.speedup {
			if a.class == Faster {
				return cmp.Compare(b.speedup, a.speedup) // best improvement first
			}
			return cmp.Compare(a.speedup, b.speedup) // worst regression first
		}
		return strings.Compare(a.key, b.key)
	})
	return res
}

// build is one case's comparison, whole: its class and metrics from its two rows (either
// nil when the case is in one run only); without say, its metrics' changes and noise are
// not put in words (Join classes every case, and only the cases shown are said). Its
// metrics are made in room's space (nil: their own), for a caller done with them before
// it builds the next.
func build(key string, b, n *entry, opt Options, say bool, room []Metric) Case {
	ref := b
	if ref == nil {
		ref = n
	}
	c := Case{Key: key, Testlist: ref.testlist, OpType: ref.op, Args: ref.label, Backend: ref.backend,
		Cluster: ref.cluster, WorldSize: ref.ws, PctOfRoofline: roofline(b, n)}
	if b != nil {
		c.BaseStatus = b.status.String()
	}
	if n != nil {
		c.NewStatus, c.NewMessage = n.status.String(), n.message
	}
	switch {
	case n == nil:
		c.Class = OnlyBase
	case b == nil:
		c.Class = OnlyNew
	case b.status == okWord && n.status != okWord:
		c.Class = Broken
	case b.status != okWord && n.status == okWord:
		c.Class = Fixed
	case b.status != okWord:
		c.Class = Unmeasured
	default:
		classify(&c, b, n, opt, say, room)
		if (b.impossible || n.impossible) && c.Primary != nil {
			c.Class = Impossible // a broken timer or cached inputs: the change means nothing
		}
	}
	return c
}

// Len is how many cases the comparison has.
func (r *Result) Len() int { return len(r.cases) }

// Case is the i-th case, in the summary's order (classes, then worst regression or best
// improvement first).
func (r *Result) Case(i int) Case {
	j := r.cases[i]
	return build(j.key, j.b, j.n, r.Options, true, nil)
}

// Cases are all the cases, in order.
func (r *Result) Cases() []Case {
	out := make([]Case, len(r.cases))
	for i := range r.cases {
		out[i] = r.Case(i)
	}
	return out
}

func rank(class string) int {
	for i, c := range classOrder {
		if c == class {
			return i
		}
	}
	return len(classOrder)
}

func classify(c *Case, b, n *entry, opt Options, say bool, room []Metric) {
	var seen [8]word
	names := seen[:0] // the metrics taken, in order: a row has a few
	// room for both sides' metrics, which mostly have the same names
	c.Metrics = slices.Grow(room[:0], max(len(b.metrics), len(n.metrics)))
	for _, side := range []*entry{b, n} {
		for _, x := range side.metrics {
			if slices.Contains(names, x.name) {
				continue
			}
			names = append(names, x.name)
			bv, ok1 := b.value(x.name)
			nv, ok2 := n.value(x.name)
			// a change is only defined between finite values over a positive base whose
			// ratio is finite too (a base of 1e-320 made the change -Inf, which JSON cannot
			// hold)
			if !ok1 || !ok2 || bv.v <= 0 || !finite(bv.v) || !finite(nv.v) || !finite((nv.v-bv.v)/bv.v) {
				continue
			}
			c.Metrics = append(c.Metrics, metric(bv, nv, opt, say))
		}
	}
	for i := range c.Metrics {
		if b.primary != 0 && c.Metrics[i].Name == b.primary.String() {
			c.Primary = &c.Metrics[i]
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

func metric(b, n value, opt Options, say bool) Metric {
	name := b.name.String()
	dir := results.DirectionOf(name)
	bv, nv := b.v, n.v
	m := Metric{Name: name, Direction: dir.String(), Base: bv, New: nv}
	m.Ratio = nv / bv
	m.Speedup = m.Ratio
	if dir == results.Lower {
		m.Speedup = bv / nv
	}
	g := m.Speedup - 1 // the factor above 1, signed: 1.05x faster is +0.05, 1.05x slower -0.05
	if m.Speedup < 1 {
		g = 1 - 1/m.Speedup
	}
	better, worse := Faster, Slower
	bl, bh, bhow := b.lo, b.hi, b.how.String()
	nl, nh, nhow := n.lo, n.hi, n.how.String()
	var noise string
	switch {
	case math.Abs(g) < opt.Same:
		m.Class = Same
		if say {
			noise = opt.below
		}
	case bhow != "" && nhow != "":
		m.BaseLo, m.BaseHi, m.NewLo, m.NewHi = bl, bh, nl, nh
		noise = bhow
		if nhow != bhow && say {
			noise = bhow + " / " + nhow
		}
		disjoint := nh < bl || nl > bh
		switch {
		case !disjoint:
			m.Class = Ambiguous
			if say {
				noise += ": intervals overlap"
			}
		case g > 0:
			m.Class = better
		default:
			m.Class = worse
		}
	default:
		noise = "no spread recorded"
		switch {
		case math.Abs(g) < opt.NoSpread:
			m.Class = Ambiguous
		case g > 0:
			m.Class = better
		default:
			m.Class = worse
		}
	}
	if say {
		m.Change, m.Noise = Words(m.Speedup), noise
	}
	return m
}

// Words is a speed-up as the summary says it: "1.53x faster", "1.53x slower", "same" at 1.
func Words(speedup float64) string {
	switch {
	case speedup > 1:
		return strconv.FormatFloat(speedup, 'f', 2, 64) + "x faster"
	case speedup < 1 && speedup > 0:
		return strconv.FormatFloat(1/speedup, 'f', 2, 64) + "x slower"
	}
	return "same"
}

func pct(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(f*100, 'f', 2, 64), "0"), ".") + " %"
}

// roofline is each side's % of the roofline, when judged (nil when neither is).
func roofline(b, n *entry) *Roofline {
	var out Roofline
	if b != nil && b.solPct > 0 {
		out.Base = b.solPct
	}
	if n != nil && n.solPct > 0 {
		out.New = n.solPct
	}
	if out == (Roofline{}) {
		return nil
	}
	return &out
}

// WriteJSON writes the result as one JSON document, a case a line, without holding its
// text whole: {"base", "new", "thresholds", "counts", "cases": [...]}.
func (r *Result) WriteJSON(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	head, err := json.Marshal(r) // all but the cases, which are not exported
	if err != nil {
		return err
	}
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"cases":[`)
	// the cases encoded on every core, a chunk at a time into buffers used again, and
	// written in order
	const chunk = 1024
	err = par.Ordered(ctx, (len(r.cases)+chunk-1)/chunk, 0, func(_ context.Context, i int) (*[]byte, error) {
		out := caseLines.Get().(*[]byte)
		b := (*out)[:0]
		var room []Metric // each case's metrics, in the room of the last: written, then let go
		for k := i * chunk; k < min((i+1)*chunk, len(r.cases)); k++ {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, '\n')
			j := &r.cases[k]
			c := build(j.key, j.b, j.n, r.Options, true, room)
			var err error
			if b, err = appendCase(b, &c); err != nil { // as json.Marshal writes it
				return nil, err
			}
			if c.Metrics != nil {
				room = c.Metrics
			}
		}
		*out = b
		return out, nil
	}, func(_ int, out *[]byte) error {
		_, err := bw.Write(*out)
		caseLines.Put(out)
		return err
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// caseLines hold a chunk of the cases as WriteJSON writes them.
var caseLines = sync.Pool{New: func() any { return new([]byte) }}

// Regressions are the cases that fail --fail-on-regression PCT: slower on the headline
// metric by a factor of at least 1 + PCT/100 (a time that grew by PCT % or more, a
// throughput that fell to 1/(1 + PCT/100) or less), broken (ok in base, not ok now), and —
// unless allowMissing — in the base but not in the new run at all (a new run whose
// harness crashed measured nothing: every case is missing, and that fails the gate).
func (r *Result) Regressions(pctLimit float64, allowMissing bool) []Case {
	var out []Case
	for i := range r.cases {
		if r.fails(i, pctLimit, allowMissing) {
			out = append(out, r.Case(i))
		}
	}
	return out
}

// fails is whether case i fails --fail-on-regression pctLimit (Regressions).
func (r *Result) fails(i int, pctLimit float64, allowMissing bool) bool {
	c := &r.cases[i]
	slower := c.class == Slower && c.hasPrimary && c.speedup > 0 && 1/c.speedup >= 1+pctLimit/100
	return slower || c.class == Broken || (c.class == OnlyBase && !allowMissing)
}

// Markdown writes the summary for a GitHub step summary: counts, then regressions worst
// first, broken cases, improvements, ambiguous ones, and cases in one run only.
func (r *Result) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## opx compare\n\n")
	fmt.Fprintf(w, "Base: `%s` (%s) · New: `%s` (%s)\n\n", r.Base.Dir, r.Base.label(), r.New.Dir, r.New.label())
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
		len(r.cases), strings.Join(parts, ", "), pct(r.Options.Same), pct(r.Options.NoSpread), strings.Join(r.Options.Key, ", "))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "\n**Cannot be trusted:** %s.\n", safe.Markdown(p))
	}
	for _, p := range r.Warnings {
		fmt.Fprintf(w, "\n**Warning:** %s.\n", safe.Markdown(p))
	}
	if len(r.Nodes) > 0 {
		fmt.Fprintf(w, "\n**The runs' nodes differ** (their fingerprints): %s. A change may be the node's, not the code's.\n", cell(strings.Join(r.Nodes, "; ")))
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

// TableRows is how many cases a table of the Markdown lists (the worst first): a step
// summary holds at most 1 MiB, and --json has every case.
const TableRows = 100

// pick is the first n cases of a class, in the result's order, and how many it has.
func (r *Result) pick(class string, n int) ([]Case, int) {
	var out []Case
	total := 0
	for i, c := range r.cases {
		if c.class == class {
			if total < n {
				out = append(out, r.Case(i))
			}
			total++
		}
	}
	return out, total
}

func (r *Result) table(w io.Writer, title, class string, folded bool) {
	cs, total := r.pick(class, TableRows)
	if total == 0 {
		return
	}
	if folded {
		fmt.Fprintf(w, "\n<details><summary>%s (%d)</summary>\n\n", title, total)
	} else {
		fmt.Fprintf(w, "\n### %s (%d)\n\n", title, total)
	}
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Metric | Base | New | Change | Noise |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
	for _, c := range cs {
		p := c.Primary
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args),
			cell(c.Backend), cell(c.Cluster), c.WorldSize, p.Name, results.Format(p.Name, p.Base), results.Format(p.Name, p.New),
			p.Change, cell(p.Noise))
	}
	more(w, total-len(cs))
	if folded {
		fmt.Fprintln(w, "\n</details>")
	}
}

func (r *Result) statusTable(w io.Writer, title, class string) {
	cs, total := r.pick(class, TableRows)
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s (%d)\n\n", title, total)
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Base status | New status | Message |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | --- | --- |")
	for _, c := range cs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args), cell(c.Backend),
			cell(c.Cluster), c.WorldSize, dash(c.BaseStatus), dash(c.NewStatus), cell(safe.Trunc(c.NewMessage, 160)))
	}
	more(w, total-len(cs))
}

// more says how many cases a table left out.
func more(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "\n… and %d more (`opx compare --json FILE` lists every case).\n", n)
	}
}

// cell escapes a markdown table cell.
func cell(s string) string { return safe.Markdown(s) }

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
