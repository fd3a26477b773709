// Package plot draws a series of measured points over time as an inline SVG: the one
// drawing of a series, for the history page (opx history check --html) and the dashboard
// (opx serve).
package plot

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/results"
)

// A Point is one run's value (Lo and Hi its recorded spread, when Spread), at At (Unix
// seconds), measured on Node.
type Point struct {
	At     int64
	V      float64
	Lo, Hi float64
	Spread bool
	Node   string
}

// A Mark is a dashed line at At (Unix seconds) with its label: a change at its first run.
type Mark struct {
	At    int64
	Label string
}

// A Series is what SVG draws: its metric (the unit its values are said in), which way is
// better, its points oldest first, and its marks.
type Series struct {
	Metric        string
	LowerIsBetter bool
	Points        []Point
	Marks         []Mark
}

// SVG is the series as an inline SVG: time across with dated ticks, the metric up (log
// scale) with value ticks in its unit, each run a dot with its spread as a line, each
// mark a dashed line at its time. Every label is drawn inside the box, and every text in
// it is escaped: the SVG is numbers and escaped text alone.
func SVG(se Series) string {
	const w, h = 900.0, 240.0
	const left, right, top, bottom = 78.0, 16.0, 22.0, 28.0
	if len(se.Points) == 0 {
		return ""
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, o := range se.Points {
		at := float64(o.At)
		t0, t1 = math.Min(t0, at), math.Max(t1, at)
		a, b := o.V, o.V
		if o.Spread && o.Lo > 0 {
			a, b = math.Min(a, o.Lo), math.Max(b, o.Hi)
		}
		lo, hi = math.Min(lo, a), math.Max(hi, b)
	}
	if t1 == t0 {
		t0, t1 = t0-43200, t1+43200 // one run: half a day either side
	}
	lo, hi = math.Log(lo), math.Log(hi)
	if hi-lo < 0.02 {
		mid := (hi + lo) / 2
		lo, hi = mid-0.01, mid+0.01
	}
	margin := (hi - lo) * 0.08
	lo, hi = lo-margin, hi+margin
	x := func(at float64) float64 { return left + (at-t0)/(t1-t0)*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - (math.Log(v)-lo)/(hi-lo)*(h-top-bottom) }
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" width="100%%" role="img" aria-label="%s over time">`, w, h, esc(se.Metric))
	fmt.Fprintf(&b, `<text x="4" y="14" class="ax">%s (log scale; %s is better)</text>`, esc(se.Metric), map[bool]string{true: "lower", false: "higher"}[se.LowerIsBetter])
	for _, v := range valueTicks(math.Exp(lo), math.Exp(hi)) {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="ax" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-4, y(v)+4, esc(results.Format(se.Metric, v)))
	}
	ticks := dateTicks(t0, t1)
	for i, t := range ticks {
		anchor := "middle"
		switch {
		case i == 0 && x(t) < left+40:
			anchor = "start"
		case i == len(ticks)-1 && x(t) > w-right-40:
			anchor = "end"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="tick"/><text x="%.1f" y="%g" class="ax" text-anchor="%s">%s</text>`,
			x(t), x(t), h-bottom, h-bottom+4, x(t), h-bottom+16, anchor, time.Unix(int64(t), 0).UTC().Format("Jan 2"))
	}
	for _, c := range se.Marks {
		cx := x(float64(c.At))
		label, tx, anchor := esc(c.Label), cx+3, "start"
		if cx > w-right-110 {
			tx, anchor = cx-3, "end"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="cp"/><text x="%.1f" y="%g" class="cpl" text-anchor="%s">%s</text>`,
			cx, cx, top, h-bottom, tx, top+10, anchor, label)
	}
	for _, o := range se.Points {
		px := x(float64(o.At))
		if o.Spread && o.Lo > 0 && o.Hi >= o.Lo {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="sp"/>`, px, px, y(o.Lo), y(o.Hi))
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5"><title>%s on %s, %s</title></circle>`, px, y(o.V),
			esc(results.Format(se.Metric, o.V)), esc(o.Node), time.Unix(o.At, 0).UTC().Format("2006-01-02 15:04 UTC"))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// valueTicks are up to 6 values between lo and hi at 1, 2 and 5 times a power of ten
// (fewer steps when the range is wide), at least two.
func valueTicks(lo, hi float64) []float64 {
	for _, steps := range [][]float64{{1, 2, 5}, {1, 3}, {1}} {
		var out []float64
		for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range steps {
				if v := m * math.Pow(10, e); v >= lo && v <= hi {
					out = append(out, v)
				}
			}
		}
		if len(out) <= 6 && len(out) >= 2 {
			return out
		}
		if len(out) < 2 { // a narrow range: its ends and middle
			mid := math.Sqrt(lo * hi)
			return []float64{lo, mid, hi}
		}
	}
	return []float64{lo, hi}
}

// dateTicks are up to 6 midnights (UTC) from t0 to t1, evenly a whole number of days apart;
// t0 and t1 themselves when the span is under a day.
func dateTicks(t0, t1 float64) []float64 {
	const day = 86400.0
	first := math.Ceil(t0/day) * day
	span := (t1 - first) / day
	if span < 0 {
		return []float64{t0, t1}
	}
	step := math.Max(1, math.Ceil(span/5))
	var out []float64
	for t := first; t <= t1; t += step * day {
		out = append(out, t)
	}
	return out
}
