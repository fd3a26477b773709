package history

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/history/synth"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/verdict"
)

// realRuns are a real history's results files as the store's runs: a commit's files (one
// per Python environment, measured by one nightly job) are one run, at the earliest; a
// benchmark is a case whose op is its suite ("query_benchmarks"), its backend the
// environment, on one cluster (the hosted runners' label), so its siblings are the suite's
// other benchmarks in that run. No node, CPU or clock is recorded: each job ran on a
// hosted runner opx cannot tell apart.
func realRuns(t testing.TB, path string) []*recorded {
	files, err := synth.ReadReal(path)
	if err != nil {
		t.Fatal(err)
	}
	byCommit := map[string]*recorded{}
	var out []*recorded
	for _, f := range files {
		rec := byCommit[f.Commit]
		if rec == nil {
			rec = &recorded{runID: "nightly-" + f.Commit, attempt: 1, at: f.At, sourceSHA: f.Commit, opxVersion: "django-asv",
				cells: map[string]*pyjson.Object{"c": pyjson.NewObject()}}
			rec.origin = rec.at.Format(time.RFC3339Nano)
			byCommit[f.Commit] = rec
			out = append(out, rec)
		}
		for _, p := range f.Points {
			suite, name, _ := strings.Cut(p.Benchmark, ".")
			args, _ := json.Marshal(map[string]string{"benchmark": name})
			pt := point{key: results.CaseKey("django-asv", suite, string(args), f.Env, 1, "ubuntu-latest"), testlist: "django-asv", op: suite,
				args: string(args), backend: f.Env, cluster: "ubuntu-latest", ws: 1, metric: "seconds", lower: true, outcome: verdict.Measured,
				value: p.V, lo: p.Lo, hi: p.Hi, spread: p.Spread, n: 10, cell: "c", ctx: context_{ImageDigest: "conda " + f.Env}}
			rec.points = append(rec.points, pt)
			rec.measured++
		}
	}
	return out
}

// BenchmarkRealHistory lives the nightly loop on a real history no one here wrote
// (testdata/real/django-asv.tsv.gz: four years of Django's nightly benchmarks on GitHub's
// hosted runners): each night's run added to a store and checked as opx history check
// --fail-on-regression 5 would, then tallied — the nights the gate fails, the alerts a
// team would be told (opx history notify's rule: Unannounced, then Announced), and the
// changes found, corroborated or not. There are no labels: these are the volumes a team would
// live with, nothing is tuned to them.
//
//	go test ./internal/history -run '^$' -bench RealHistory -benchtime 1x
func BenchmarkRealHistory(b *testing.B) {
	runs := realRuns(b, "testdata/real/django-asv.tsv.gz")
	for range b.N {
		s, err := Open(b.Context(), filepath.Join(b.TempDir(), "h.db"), true, 0)
		if err != nil {
			b.Fatal(err)
		}
		var failNights, newNights, judged, alerts, wokenNights, waited, seriesFails int
		changeIDs, uncorroborated := map[string]bool{}, map[string]bool{}
		var sizes []int
		start := time.Now()
		for _, rec := range runs {
			if err := s.write(b.Context(), "real", rec); err != nil {
				b.Fatal(err)
			}
			f, err := s.Check(b.Context(), CheckOptions{Options: changes.Defaults})
			if err != nil {
				b.Fatal(err)
			}
			if f.MeasuredAtTest == 0 {
				continue
			}
			judged++
			g := Gate{Pct: 5}
			if reg := f.Regressions(g); len(reg) > 0 {
				failNights++
				seriesFails += len(reg)
			}
			if len(f.Regressions(Gate{Pct: g.Pct, NewOnly: true})) > 0 {
				newNights++
			}
			for _, c := range f.Changes {
				changeIDs[c.ID] = true
				if c.Uncorroborated {
					uncorroborated[c.ID] = true
					if c.waits(g.Pct) {
						waited++
					}
				}
			}
			// opx history notify's rule: each alert group told once (a group dated a run
			// or two apart on a later night is the same group), from the first night on
			news, known, err := s.Unannounced(b.Context(), f, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Announced(b.Context(), "bench", Alert{ID: FirstNotice}); err != nil {
				b.Fatal(err)
			}
			for _, a := range append(known, news...) {
				if err := s.Announced(b.Context(), "bench", a); err != nil {
					b.Fatal(err)
				}
			}
			if len(news) > 0 {
				wokenNights++
			}
			for _, a := range news {
				alerts++
				sizes = append(sizes, len(a.Changes))
			}
		}
		took := time.Since(start)
		s.Close()
		slices.Sort(sizes)
		med := 0
		if len(sizes) > 0 {
			med = sizes[len(sizes)/2]
		}
		fmt.Printf("real history: %d runs added and checked in %.0f s; the gate (5%%) fails on %d of %d nights (%.1f%%; untriaged, a change fails every night it stands), %d series-nights; on %d nights (%.1f%%) for a change new that night; %d alerts told (opx history notify's rule), on %d nights (%.1f%%; median %d changes each); %d changes, %d of them uncorroborated on their first night (%d first-night waits)\n",
			len(runs), took.Seconds(), failNights, judged, 100*float64(failNights)/float64(max(1, judged)), seriesFails,
			newNights, 100*float64(newNights)/float64(max(1, judged)), alerts,
			wokenNights, 100*float64(wokenNights)/float64(max(1, judged)), med, len(changeIDs), len(uncorroborated), waited)
		b.ReportMetric(float64(failNights)/float64(max(1, judged)), "fail-nights/night")
		b.ReportMetric(float64(newNights)/float64(max(1, judged)), "new-fail-nights/night")
		b.ReportMetric(float64(alerts)/float64(max(1, judged)), "alerts/night")
	}
}
