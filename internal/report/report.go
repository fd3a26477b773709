// Package report is `opx report`: one self-contained HTML page over a run's artifacts.
// No network (a Content-Security-Policy forbids every fetch), CSS embedded, charts as
// inline SVG, one small inline script that makes tables sortable. It shows, in order: the
// verdict and counts, coverage per shard, rows per op type and backend, latency and
// throughput per case across backends and hardware (chart and table), errors and
// unsupported rows grouped by message, and provenance (source SHA, run id and attempts,
// images and digests, clusters, hosts, software). The page is a pure function of the
// artifacts: no clock, no randomness, so it can be compared against a golden file.
package report

import (
	_ "embed"
	"fmt"
	"html"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/version"
)

//go:embed report.html.tmpl
var pageTemplate string

//go:embed report.css
var pageCSS string

//go:embed report.js
var pageJS string

// tmpl is parsed on first use: every other opx command starts without paying for it.
var tmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		"css": func() template.CSS { return template.CSS(pageCSS) },
		"js":  func() template.JS { return template.JS(pageJS) },
	}).Parse(pageTemplate))
})

type page struct {
	Title, RunID, SourceSHA, Verdict, VerdictClass, Generator string
	Attempts                                                  string
	Tiles                                                     []tile
	Shards                                                    []shardRow
	OpBackend                                                 []opBackendRow
	Ops                                                       []opSection
	Errors, Unsupported                                       []msgGroup
	Provenance                                                []kv
	Images                                                    []imageRow
}

type tile struct{ Label, Value, Class string }

type shardRow struct {
	ID, Status, Cluster, Runner, Backends, Attempt, Exit, WorldSize string
	Requested, OK, Unsupported, Error                               int
	Coverage                                                        string
	CoveragePct                                                     float64
}

type opBackendRow struct {
	OpType, Backend               string
	Cases, OK, Unsupported, Error int
}

type opSection struct {
	OpType       string
	Series       []seriesHead
	Cases        []caseRow
	LatencyChart template.HTML
	ThruChart    template.HTML
	ThruName     string
}

type seriesHead struct{ Name, Color string }

type caseRow struct {
	Case  string
	Cells []caseCell
}

type caseCell struct {
	Latency, Spread, Thru, Status, Class string
	SortKey                              string
}

type msgGroup struct {
	Message  string
	Count    int
	Shards   string
	Example  string
	Backends string
}

type kv struct{ Key, Value string }

type imageRow struct{ Image, Digest, Shards string }

var palette = []string{"#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"}

// Write renders the page for run.
func Write(w io.Writer, run *results.Run) error {
	return tmpl().Execute(w, build(run))
}

func build(run *results.Run) *page {
	p := &page{RunID: run.RunID, SourceSHA: run.SourceSHA, Generator: "opx " + version.Version}
	if p.RunID == "" {
		p.RunID = "(no shard ran)"
	}
	p.Title = "opx report — run " + p.RunID
	var attempts []string
	seenAttempt := map[string]bool{}
	var ok, unsup, errs, requested, succeeded, missing int
	for _, s := range run.Shards {
		a := ""
		if s.HasAttempt {
			a = strconv.Itoa(s.Attempt)
			if !seenAttempt[a] {
				seenAttempt[a] = true
				attempts = append(attempts, a)
			}
		}
		ok, unsup, errs, requested = ok+s.OK, unsup+s.Unsupported, errs+s.Error, requested+s.RequestedShapes
		switch s.Status {
		case "success":
			succeeded++
		case "missing":
			missing++
		}
		produced := s.OK + s.Unsupported + s.Error
		row := shardRow{ID: s.ID, Status: s.Status, Cluster: dash(s.Cluster), Runner: dash(s.Runner),
			Backends: dash(strings.Join(s.Backends, ", ")), Attempt: dash(a), Exit: dash(s.ExitCode),
			WorldSize: dash(strings.TrimPrefix(strconv.Itoa(s.WorldSize), "0")), Requested: s.RequestedShapes, OK: s.OK, Unsupported: s.Unsupported, Error: s.Error}
		if s.RequestedShapes > 0 {
			row.CoveragePct = math.Min(100, 100*float64(produced)/float64(s.RequestedShapes))
		}
		row.Coverage = fmt.Sprintf("%d / %d", produced, s.RequestedShapes)
		p.Shards = append(p.Shards, row)
	}
	sort.Strings(attempts)
	p.Attempts = dash(strings.Join(attempts, ", "))
	p.Verdict, p.VerdictClass = "complete: every shard succeeded", "good"
	if !run.Summary.Success {
		p.Verdict, p.VerdictClass = fmt.Sprintf("incomplete: %d of %d shards succeeded", succeeded, len(run.Shards)), "bad"
	}
	p.Tiles = []tile{
		{"Shards succeeded", fmt.Sprintf("%d / %d", succeeded, len(run.Shards)), cls(succeeded == len(run.Shards) && len(run.Shards) > 0)},
		{"Shards missing", strconv.Itoa(missing), cls(missing == 0)},
		{"Cases requested", strconv.Itoa(requested), ""},
		{"OK rows", strconv.Itoa(ok), cls(ok > 0)},
		{"Unsupported rows", strconv.Itoa(unsup), ""},
		{"Error rows", strconv.Itoa(errs), cls(errs == 0)},
	}
	p.OpBackend = opBackend(run.Rows)
	p.Ops = opSections(run.Rows)
	p.Errors = groups(run.Rows, "error")
	p.Unsupported = groups(run.Rows, "unsupported")
	p.Provenance, p.Images = provenance(run)
	return p
}

func cls(good bool) string {
	if good {
		return "good"
	}
	return "bad"
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func opBackend(rows []results.Row) []opBackendRow {
	idx := map[[2]string]*opBackendRow{}
	var out []*opBackendRow
	for _, r := range rows {
		k := [2]string{r.OpType, r.Backend}
		o := idx[k]
		if o == nil {
			o = &opBackendRow{OpType: r.OpType, Backend: r.Backend}
			idx[k] = o
			out = append(out, o)
		}
		o.Cases++
		switch r.Status {
		case "ok":
			o.OK++
		case "unsupported":
			o.Unsupported++
		case "error":
			o.Error++
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].OpType != out[j].OpType {
			return out[i].OpType < out[j].OpType
		}
		return out[i].Backend < out[j].Backend
	})
	res := make([]opBackendRow, len(out))
	for i, o := range out {
		res[i] = *o
	}
	return res
}

// opSections lines each op type's cases up across series (backend × cluster × world size).
// cellOf is one case of one series in the table, and its bars in the latency and
// throughput charts (nil when it has none).
func cellOf(r *results.Row, thruName, colour string) (cc caseCell, lat, thru *bar) {
	cc = caseCell{Latency: "—", Status: "not run", Class: "missing", SortKey: "-1"}
	if r == nil {
		return cc, nil, nil
	}
	cc.Status, cc.Class = r.Status, r.Status
	if r.Status != "ok" {
		cc.Latency = r.Status
		return cc, nil, nil
	}
	if name, ok := r.Primary(); ok {
		v := r.Metrics[name]
		cc.Latency, cc.SortKey = results.Format(name, v), strconv.FormatFloat(v, 'g', -1, 64)
		if lo, hi, _, ok := r.Spread(name); ok {
			cc.Spread = results.Format(name, lo) + " – " + results.Format(name, hi)
		}
		if isTime(name) {
			lat = &bar{v, results.Format(name, v), colour}
		}
	}
	if thruName != "" {
		if v, ok := r.Metrics[thruName]; ok {
			cc.Thru = results.Format(thruName, v)
			thru = &bar{v, cc.Thru, colour}
		}
	}
	return cc, lat, thru
}

func opSections(rows []results.Row) []opSection {
	var types []string
	byType := map[string][]results.Row{}
	for _, r := range rows {
		if _, ok := byType[r.OpType]; !ok {
			types = append(types, r.OpType)
		}
		byType[r.OpType] = append(byType[r.OpType], r)
	}
	sort.Strings(types)
	var out []opSection
	for _, t := range types {
		rs := byType[t]
		var series, cases []string
		seenS, seenC := map[string]bool{}, map[string]bool{}
		cell := map[[2]string]*results.Row{}
		thruName := ""
		for i := range rs {
			r := &rs[i]
			s, c := r.Series(), r.Testlist+" · "+r.ArgsLabel
			if !seenS[s] {
				seenS[s] = true
				series = append(series, s)
			}
			if !seenC[c] {
				seenC[c] = true
				cases = append(cases, c)
			}
			cell[[2]string{c, s}] = r
			if thruName == "" && r.Status == "ok" {
				thruName = throughputMetric(r)
			}
		}
		sort.Strings(series)
		sec := opSection{OpType: t, ThruName: thruName}
		for i, s := range series {
			sec.Series = append(sec.Series, seriesHead{s, palette[i%len(palette)]})
		}
		var latBars, thruBars []barGroup
		for _, c := range cases {
			cr := caseRow{Case: c}
			lg, tg := barGroup{Label: c}, barGroup{Label: c}
			for i, s := range series {
				cc, lat, thru := cellOf(cell[[2]string{c, s}], thruName, palette[i%len(palette)])
				if lat != nil {
					lg.Bars = append(lg.Bars, *lat)
				}
				if thru != nil {
					tg.Bars = append(tg.Bars, *thru)
				}
				cr.Cells = append(cr.Cells, cc)
			}
			sec.Cases = append(sec.Cases, cr)
			if len(lg.Bars) > 0 {
				latBars = append(latBars, lg)
			}
			if len(tg.Bars) > 0 {
				thruBars = append(thruBars, tg)
			}
		}
		sec.LatencyChart = chart(t+" latency (shorter is better)", latBars)
		if thruName != "" {
			sec.ThruChart = chart(t+" "+results.Unit(thruName)+" (longer is better)", thruBars)
		}
		out = append(out, sec)
	}
	return out
}

// isTime reports whether a metric is a time (the latency chart's metric).
func isTime(name string) bool { return results.DirectionOf(name) == results.Lower }

func throughputMetric(r *results.Row) string {
	for _, k := range r.MetricOrder {
		if results.DirectionOf(k) == results.Higher {
			return k
		}
	}
	return ""
}

type bar struct {
	V     float64
	Label string
	Color string
}

type barGroup struct {
	Label string
	Bars  []bar
}

// chart draws grouped horizontal bars: one group per case, one bar per series, each
// scaled to the largest value of its group so backends and hardware compare at a glance.
func chart(title string, groups []barGroup) template.HTML {
	if len(groups) == 0 {
		return ""
	}
	const width, labelW, barH, gap, pad = 960, 400, 14, 10, 4
	h := 28
	for _, g := range groups {
		h += len(g.Bars)*(barH+2) + gap
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, width, h, width, h)
	fmt.Fprintf(&b, `<title>%s</title><text x="0" y="16" class="ct">%s</text>`, html.EscapeString(title), html.EscapeString(title))
	y := 28
	for _, g := range groups {
		max := 0.0
		for _, br := range g.Bars {
			max = math.Max(max, br.V)
		}
		gh := len(g.Bars) * (barH + 2)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="cl" text-anchor="end">%s</text>`, labelW-8, y+gh/2+4, html.EscapeString(trunc(g.Label, 60)))
		for _, br := range g.Bars {
			w := 0.0
			if max > 0 {
				w = (width - labelW - 90) * br.V / max
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`, labelW, y, math.Max(w, 1), barH, br.Color, html.EscapeString(br.Label))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="cv">%s</text>`, float64(labelW)+math.Max(w, 1)+pad, y+barH-3, html.EscapeString(br.Label))
			y += barH + 2
		}
		y += gap
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func trunc(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// groups gathers rows of a status by message, most frequent first.
func groups(rows []results.Row, status string) []msgGroup {
	type agg struct {
		g        msgGroup
		shards   map[string]bool
		backends map[string]bool
	}
	idx := map[string]*agg{}
	var order []string
	for _, r := range rows {
		if r.Status != status {
			continue
		}
		msg := r.Message
		if msg == "" {
			msg = "(no message)"
		}
		a := idx[msg]
		if a == nil {
			a = &agg{g: msgGroup{Message: msg, Example: r.Testlist + " · " + r.OpType + " " + r.ArgsLabel},
				shards: map[string]bool{}, backends: map[string]bool{}}
			idx[msg] = a
			order = append(order, msg)
		}
		a.g.Count++
		a.shards[r.Shard] = true
		a.backends[r.Backend] = true
	}
	out := make([]msgGroup, 0, len(order))
	for _, m := range order {
		a := idx[m]
		a.g.Shards = strings.Join(slices.Sorted(maps.Keys(a.shards)), ", ")
		a.g.Backends = strings.Join(slices.Sorted(maps.Keys(a.backends)), ", ")
		out = append(out, a.g)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

func provenance(run *results.Run) ([]kv, []imageRow) {
	clusters, runners, hosts, versions, runs := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	software := map[string]map[string]bool{}
	type img struct{ image, digest string }
	images := map[img][]string{}
	var imgOrder []img
	for _, s := range run.Shards {
		if s.Dir == "" {
			continue
		}
		clusters[s.Cluster], runners[s.Runner] = true, true
		for _, h := range s.Hosts {
			hosts[h] = true
		}
		for _, v := range s.Versions {
			versions[v] = true
		}
		for _, r := range s.Runs {
			runs[r] = true
		}
		for k, v := range s.Software {
			if software[k] == nil {
				software[k] = map[string]bool{}
			}
			software[k][v] = true
		}
		k := img{s.Image, s.Digest}
		if _, ok := images[k]; !ok {
			imgOrder = append(imgOrder, k)
		}
		images[k] = append(images[k], s.ID)
	}
	j := func(m map[string]bool) string { return dash(strings.Join(slices.Sorted(maps.Keys(m)), ", ")) }
	kvs := []kv{
		{"Source SHA", dash(run.SourceSHA)},
		{"Run id", dash(run.RunID)},
		{"Attempts", ""},
		{"Clusters", j(clusters)},
		{"Runners", j(runners)},
		{"Hosts", j(hosts)},
		{"Harness versions", j(versions)},
		{"Benchmark runs", j(runs)},
	}
	var attempts []string
	seen := map[string]bool{}
	for _, s := range run.Shards {
		if s.HasAttempt && !seen[strconv.Itoa(s.Attempt)] {
			seen[strconv.Itoa(s.Attempt)] = true
			attempts = append(attempts, strconv.Itoa(s.Attempt))
		}
	}
	sort.Strings(attempts)
	kvs[2].Value = dash(strings.Join(attempts, ", "))
	var swKeys []string
	for k := range software {
		swKeys = append(swKeys, k)
	}
	sort.Strings(swKeys)
	for _, k := range swKeys {
		kvs = append(kvs, kv{"Software: " + k, j(software[k])})
	}
	var rows []imageRow
	for _, k := range imgOrder {
		image, digest := k.image, k.digest
		if image == "" {
			image = "none (no container)"
		}
		rows = append(rows, imageRow{image, dash(digest), strings.Join(images[k], ", ")})
	}
	return kvs, rows
}

// WriteFile writes the run's page to path, atomically.
func WriteFile(path string, run *results.Run) error {
	return files.WriteAtomicFunc(path, 0o644, func(w io.Writer) error { return Write(w, run) })
}
