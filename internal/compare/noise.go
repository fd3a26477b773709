package compare

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

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/results"
)

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

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
