// Rendering: the static history page (opx history report) and its SVG plots.

package history

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/plot"
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
		p := pagePlot{Key: c.Key, SVG: template.HTML(plot.SVG(plotOf(se)))} // numbers and escaped text alone
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

// plotOf is what the series' plot draws: its measured points and its changes, each at its
// first run.
func plotOf(se *seriesRow) plot.Series {
	ps := plot.Series{Metric: se.metric, LowerIsBetter: se.lower}
	for j, o := range se.obs {
		ps.Points = append(ps.Points, plot.Point{At: se.points[se.measured[j]].at, V: o.V, Lo: o.Lo, Hi: o.Hi, Spread: o.Spread, Node: o.Node})
	}
	for _, c := range se.changes {
		ps.Marks = append(ps.Marks, plot.Mark{At: c.at.Unix(), Label: compare.Words(c.Speedup)})
	}
	return ps
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
