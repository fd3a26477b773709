// Package report is `opx report`: one self-contained HTML page of a run — verdict, coverage, cost,
// cases, charts, provenance — that opens fast at the largest sweep.
//
// It is `opx report`: one self-contained HTML page over a run's artifacts,
// sized by what a person reads, so that it opens at the largest sweep (256 shards of 500
// cases). No network (a Content-Security-Policy forbids every fetch), CSS and script
// inline. In order: the verdict and counts; coverage per shard, with the phase that
// failed, its exit status, the tail of its log and the log's path; a summary per op type
// and series (backend on cluster ×world size); per op type and hardware, latency and
// throughput against the case's size on shared log axes, one colour per series, spreads
// as whiskers; every case in a table with filtering, sorting and paging; two series
// compared case by case; errors and unsupported rows grouped by message; provenance.
//
// The cases travel as compact embedded data (dictionaries and columns) that the page's
// script draws: only the visible page of the table is in the DOM. The page is a pure
// function of the artifacts: no clock, no randomness, so it can be compared against a
// golden file.
package report

import (
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
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
	When, Where                                               string // the run's first allocation (UTC), and its clusters and hosts
	Attempts                                                  string
	Unit                                                      string // GPU, or CPU for a run of the local runner
	Tiles                                                     []tile
	Shards                                                    []shardRow
	Failures                                                  int
	Summary                                                   []summaryRow
	Errors, Unsupported                                       []msgGroup
	MoreErrors, MoreUnsupported                               int
	Provenance                                                []kv
	Images                                                    []imageRow
	Data                                                      template.JS
	Cases, Impossible                                         int
	Cost                                                      costView
	Nodes                                                     []nodeRow
	ThrottledShards, ThrottledRows                            int
	Counters                                                  counterRows
}

type tile struct{ Label, Value, Class string }

type kv struct{ Key, Value string }

type imageRow struct{ Image, Digest, Shards string }

// WriteFile reads the run in dir (its manifest given) one results file at a time and
// writes its page to path, atomically.
func WriteFile(ctx context.Context, path, manifest, dir string) (verdict.Verdict, error) {
	b, run, err := gather(ctx, manifest, dir)
	if err != nil {
		return verdict.Verdict{}, err
	}
	return run.Ledger.Verdict(), files.WriteAtomicFunc(path, 0o644, func(w io.Writer) error { return b.write(ctx, w, run) })
}

// gather reads the run into what its page shows.
func gather(ctx context.Context, manifest, dir string) (*builder, *results.Run, error) {
	b := newBuilder()
	b.runDir = filepath.Dir(manifest) // opx run's directory: its run.json is beside the manifest
	var run *results.Run
	err := results.Stream(ctx, manifest, dir, func(r *results.Run) { run = r }, func(sh *results.Shard, rows []results.Row) error {
		if b.cases == nil { // the first shard: the run's shapes are known, and so about how many cases
			b.expect(run)
		}
		for i := range rows {
			b.add(&rows[i])
		}
		return nil
	}, func(_ *results.Shard, cases []results.Case) error { // the cases no attempt wrote: "missing" rows
		for i := range cases {
			if c := &cases[i]; c.Status == "missing" {
				if b.cases == nil {
					b.expect(run)
				}
				r := c.MissingRow()
				b.add(&r)
			}
		}
		return nil
	})
	return b, run, err
}

func (b *builder) write(ctx context.Context, w io.Writer, run *results.Run) error {
	if run.Ledger == nil { // a run made, not read (Walk always fills it in)
		run.Ledger = &results.Ledger{}
	}
	p := &page{RunID: run.RunID, SourceSHA: run.SourceSHA, Generator: "opx " + version.Version, Cases: len(b.status), Unit: run.Ledger.Unit(),
		Impossible: len(b.impossible)}
	if p.RunID == "" {
		p.RunID = "(no shard ran)"
	}
	p.When, p.Where = when(run, b.runDir), where(run)
	p.Title = "opx report — run " + p.RunID + " · " + p.When
	p.Shards, p.Failures = shardRows(run)
	p.Attempts = attempts(run)
	p.Verdict, p.VerdictClass, p.Tiles = headline(run)
	p.Cost = cost(run)
	p.Nodes, p.ThrottledShards = nodes(run)
	p.Counters = b.counters
	if n := len(b.shared); n > 0 {
		p.Tiles = append(p.Tiles, tile{"Rows measured under contention", strconv.Itoa(n), "bad"})
	}
	if p.ThrottledRows = len(b.throttled); p.ThrottledRows > 0 {
		p.Tiles = append(p.Tiles, tile{"Rows on a throttled GPU", strconv.Itoa(p.ThrottledRows), "bad"})
	}
	if p.Impossible > 0 {
		p.Tiles = append(p.Tiles, tile{"Impossible rows", strconv.Itoa(p.Impossible), "bad"})
	}
	p.Summary = b.summary()
	p.Errors, p.MoreErrors = b.groups("error")
	p.Unsupported, p.MoreUnsupported = b.groups("unsupported")
	p.Provenance, p.Images = provenance(run)
	p.Provenance[2].Value = p.Attempts
	data, err := b.packed(ctx)
	if err != nil {
		return err
	}
	p.Data = template.JS(data)
	return tmpl().Execute(w, p)
}

// when is the run's time: its first allocation's grant, UTC, and its last release.
func when(run *results.Run, runDir string) string {
	first, last := run.Ledger.Measured()
	if first.IsZero() { // nothing allocated: when the run started, as its run.json says
		if rec, err := results.ReadRunRecord(context.Background(), runDir); err == nil {
			if t, err := time.Parse(time.RFC3339, rec.StartedAt); err == nil {
				return "started " + t.UTC().Format("2006-01-02 15:04 UTC") + "; nothing was allocated"
			}
		}
		return "time not recorded"
	}
	s := first.UTC().Format("2006-01-02 15:04 UTC")
	if !last.IsZero() && last.UTC().Format("2006-01-02 15:04") != first.UTC().Format("2006-01-02 15:04") {
		end := last.UTC().Format("15:04")
		if last.UTC().Format("2006-01-02") != first.UTC().Format("2006-01-02") {
			end = last.UTC().Format("2006-01-02 15:04")
		}
		s = first.UTC().Format("2006-01-02 15:04") + " to " + end + " UTC"
	}
	return s
}

// where is the run's clusters and the hosts its shards ran on (the first three, then how
// many more).
func where(run *results.Run) string {
	clusters, hosts := map[string]bool{}, map[string]bool{}
	for _, s := range run.Shards {
		if s.Dir == "" {
			continue
		}
		if s.Cluster != "" {
			clusters[s.Cluster] = true
		}
		for _, h := range s.Hosts {
			hosts[h] = true
		}
	}
	list := func(m map[string]bool) string {
		all := slices.Sorted(maps.Keys(m))
		if len(all) > 3 {
			return strings.Join(all[:3], ", ") + fmt.Sprintf(" and %d more", len(all)-3)
		}
		return strings.Join(all, ", ")
	}
	switch {
	case len(clusters) == 0:
		return "no shard ran"
	case len(hosts) == 0:
		return list(clusters)
	}
	return list(clusters) + " on " + list(hosts)
}

// headline is the page's headline and its tiles: the run's verdict (internal/verdict), in
// the words and colours every command uses. A tile is green only when the verdict is a
// success (a failed run's fine figures are shown plain, never green beside a red
// headline); a shard counts as succeeded only when it measured (an unsupported shard is
// its own tile).
func headline(run *results.Run) (string, string, []tile) {
	var ok, unsup, errs, requested, succeeded, declined, missing int
	for _, s := range run.Shards {
		ok, unsup, errs, requested = ok+s.OK, unsup+s.Unsupported, errs+s.Error, requested+s.RequestedShapes
		switch s.Status {
		case verdict.Success:
			succeeded++
		case verdict.Declined:
			declined++
		case verdict.NotRun:
			missing++
		}
	}
	l := run.Ledger
	v, t := l.Verdict(), l.Totals()
	cls := func(fine bool) string {
		switch {
		case !fine:
			return "bad"
		case v.OK:
			return "good"
		}
		return ""
	}
	tiles := []tile{
		{"Cases measured", fmt.Sprintf("%d / %d", t.Measured, t.Cases), cls(t.Measured > 0 && t.Measured+t.Unsupported == t.Cases)},
		{"Cases unsupported", strconv.Itoa(t.Unsupported), ""},
		{l.Unit() + "-hours", results.Hours(t.GPUSeconds), ""},
		{"Shards succeeded", fmt.Sprintf("%d / %d", succeeded, len(run.Shards)), cls(succeeded+declined == len(run.Shards) && succeeded > 0)},
	}
	if declined > 0 {
		tiles = append(tiles, tile{"Shards answered, none measured", strconv.Itoa(declined), ""})
	}
	return v.Line(), v.Class(), append(tiles,
		tile{"Shards missing", strconv.Itoa(missing), cls(missing == 0)},
		tile{"Cases requested", strconv.Itoa(requested), ""},
		tile{"OK rows", strconv.Itoa(ok), cls(ok > 0)},
		tile{"Unsupported rows", strconv.Itoa(unsup), ""},
		tile{"Error rows", strconv.Itoa(errs), cls(errs == 0)},
	)
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
