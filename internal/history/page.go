// Rendering: the static history page (opx history report) and its SVG plots.

package history

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/version"
)

// The page's bounds: a plot for each of the most changed series, a row for each of the
// first series listed; the rest are counted (check's JSON has them all). They keep the
// page under 5 MB, and quick to open, at any history size.
const (
	mostPlots = 60
	mostPage  = 5000
)

type pagePlot struct {
	Key   string
	SVG   template.HTML
	Notes []pageNote
}

// pageNote is one change of a plotted series: what it is, and its triage state and id.
type pageNote struct{ Text, Triage, ID string }

type pageRow struct {
	Key, Metric, Latest, Trend, Changes string
	Points                              int
}

type pageData struct {
	Generator, Newest string
	Series, Points    int
	Changes, Slower   int
	Plots             []pagePlot
	MorePlots         int
	Rows              []pageRow
	MoreRows          int
	OddNodes          string
}

// Page writes what check found as one self-contained HTML page (no script, nothing
// fetched): the changed series first, worst first, each a plot of its metric over time
// with its spread, its change points marked and what changed under them; then every
// series with its latest level and trend.
func (f *Found) Page(w io.Writer) error {
	d := pageData{Generator: "opx " + version.Version, Series: f.Series, Points: f.Points, Changes: len(f.Changes)}
	if f.Newest != nil {
		d.Newest = f.Newest.Name()
	}
	for _, c := range f.Changes {
		if c.Direction == compare.Slower {
			d.Slower++
		}
	}
	bySeries := map[string]*seriesRow{}
	for _, se := range f.series {
		bySeries[se.key] = se
	}
	triage := map[[2]any]Change{}
	for _, c := range f.Changes {
		triage[[2]any{c.Key + "\x00" + c.Metric, c.run}] = c
	}
	plotted := map[string]bool{}
	for _, c := range f.Changes { // worst first
		if plotted[c.Key] {
			continue
		}
		plotted[c.Key] = true
		if len(d.Plots) == mostPlots {
			d.MorePlots++
			continue
		}
		se := bySeries[c.Key]
		p := pagePlot{Key: c.Key, SVG: template.HTML(plot(se))}
		for _, ch := range se.changes {
			note := fmt.Sprintf("%s from run %s, %s", compare.Words(ch.Speedup), ch.RunName(), ch.Status)
			if t := ch.provenanceText(); t != "" {
				note += "; " + t
			}
			if len(ch.Nodes) > 0 {
				note += "; on " + strings.Join(ch.Nodes, ", ") + " only"
			}
			t := triage[[2]any{ch.Key + "\x00" + ch.Metric, ch.run}] // as check settled it (the series holds a copy of before)
			p.Notes = append(p.Notes, pageNote{Text: note, Triage: t.Triage, ID: t.ID})
		}
		d.Plots = append(d.Plots, p)
	}
	rows := append([]*seriesRow(nil), f.series...)
	sort.SliceStable(rows, func(i, j int) bool { // changed first, then by how far the level moved
		ci, cj := len(rows[i].changes) > 0, len(rows[j].changes) > 0
		if ci != cj {
			return ci
		}
		return math.Abs(math.Log(rows[i].trend)) > math.Abs(math.Log(rows[j].trend))
	})
	for i, se := range rows {
		if i == mostPage {
			d.MoreRows = len(rows) - mostPage
			break
		}
		r := pageRow{Key: se.key, Metric: se.metric, Points: se.npoints, Latest: se.latest, Trend: "–"}
		if t := se.trend; t != 1 {
			r.Trend = fmt.Sprintf("%+.1f%%", (t-1)*100)
		}
		var cs []string
		for _, c := range se.changes {
			cs = append(cs, compare.Words(c.Speedup)+" from run "+c.RunName())
		}
		r.Changes = strings.Join(cs, "; ")
		d.Rows = append(d.Rows, r)
	}
	var odd []string
	for n, k := range f.OddNodes {
		odd = append(odd, fmt.Sprintf("%s (%d)", n, k))
	}
	sort.Strings(odd)
	d.OddNodes = strings.Join(odd, ", ")
	return pageTmpl.Execute(w, d)
}

// trend is a series' newest level (the median of its newest 5 measured points) over its
// oldest in the window (its first 5); 1 when it has fewer than 10.
func trend(obs []changes.Obs) float64 {
	n := len(obs)
	if n < 10 {
		return 1
	}
	return math.Exp(changes.Level(obs, n-5, n) - changes.Level(obs, 0, 5))
}

// plot is the series as an inline SVG: time across with dated ticks, the metric up (log
// scale) with value ticks in its unit, each run a dot with its spread as a line, each
// change a dashed line at its first run. Every label is drawn inside the box.
func plot(se *seriesRow) string {
	const w, h = 900.0, 240.0
	const left, right, top, bottom = 78.0, 16.0, 22.0, 28.0
	if len(se.obs) == 0 {
		return ""
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	lo, hi := math.Inf(1), math.Inf(-1)
	for j, o := range se.obs {
		at := float64(se.points[se.measured[j]].at)
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
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" width="100%%" role="img" aria-label="%s over time">`, w, h, esc(se.metric))
	fmt.Fprintf(&b, `<text x="4" y="14" class="ax">%s (log scale; %s is better)</text>`, esc(se.metric), map[bool]string{true: "lower", false: "higher"}[se.lower])
	for _, v := range valueTicks(math.Exp(lo), math.Exp(hi)) {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="ax" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-4, y(v)+4, esc(results.Format(se.metric, v)))
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
	for _, c := range se.changes {
		cx := x(float64(c.at.Unix()))
		label, tx, anchor := esc(compare.Words(c.Speedup)), cx+3, "start"
		if cx > w-right-110 {
			tx, anchor = cx-3, "end"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="cp"/><text x="%.1f" y="%g" class="cpl" text-anchor="%s">%s</text>`,
			cx, cx, top, h-bottom, tx, top+10, anchor, label)
	}
	for j, o := range se.obs {
		p := se.points[se.measured[j]]
		px := x(float64(p.at))
		if o.Spread && o.Lo > 0 && o.Hi >= o.Lo {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="sp"/>`, px, px, y(o.Lo), y(o.Hi))
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5"><title>%s on %s, %s</title></circle>`, px, y(o.V),
			esc(results.Format(se.metric, o.V)), esc(o.Node), time.Unix(p.at, 0).UTC().Format("2006-01-02 15:04 UTC"))
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

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{"name": CaseName}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>opx history</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
.plot{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;margin:12px 0}
.plot h3{font-size:13px;margin:0 0 4px}
.key{color:#57606a;font-size:11px;word-break:break-all;margin:0 0 4px}
svg circle{fill:#0969da}svg .sp{stroke:#54aeff;stroke-width:1.5}svg .cp{stroke:#cf222e;stroke-dasharray:4 3;stroke-width:1.5}
svg .cpl{fill:#cf222e;font-size:12px}svg .ax{fill:#57606a;font-size:11px}svg .grid{stroke:#eaeef2}svg .tick{stroke:#8c959f}
ul.notes{margin:4px 0 0;padding-left:18px;color:#57606a}
.state{font-weight:600}.state.open{color:#cf222e}.state.acknowledged{color:#9a6700}.state.expected,.state.invalid{color:#57606a}
table{border-collapse:collapse;width:100%;font-size:12px}td,th{border-bottom:1px solid #d8dee4;padding:3px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;white-space:nowrap}
</style></head><body>
<h1>opx history</h1>
<p>{{.Series}} series ({{.Points}} points){{if .Newest}}, newest run {{.Newest}}{{end}}: {{.Changes}} changes, {{.Slower}} slower. Made by {{.Generator}}.</p>
{{if .OddNodes}}<p><b>Nodes that were the odd one out</b> (changes confined to them): {{.OddNodes}}</p>{{end}}
<h2>Changed series</h2>
{{if not .Plots}}<p>No series changed.</p>{{end}}
{{range .Plots}}<div class="plot"><h3 title="{{.Key}}">{{name .Key}}</h3><p class="key">{{.Key}}</p>{{.SVG}}<ul class="notes">{{range .Notes}}<li>{{.Text}} · triage: <span class="state {{.Triage}}">{{.Triage}}</span> <code>{{.ID}}</code></li>{{end}}</ul></div>
{{end}}{{if .MorePlots}}<p>… and {{.MorePlots}} more changed series (opx history check --json lists them all).</p>{{end}}
<h2>Every series</h2>
<table><thead><tr><th>Case</th><th>Metric</th><th>Latest</th><th>Trend in window</th><th>Runs</th><th>Changes</th></tr></thead><tbody>
{{range .Rows}}<tr><td title="{{.Key}}">{{name .Key}}</td><td>{{.Metric}}</td><td class="n">{{.Latest}}</td><td class="n">{{.Trend}}</td><td class="n">{{.Points}}</td><td>{{.Changes}}</td></tr>
{{end}}</tbody></table>
{{if .MoreRows}}<p>… and {{.MoreRows}} more series (opx history check --all --json lists them all).</p>{{end}}
</body></html>
`))
