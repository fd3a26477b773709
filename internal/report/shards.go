package report

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/verdict"
)

type shardRow struct {
	ID, Status, Cluster, Runner, Backends, Attempt, Exit, WorldSize string
	Requested, OK, Unsupported, Error                               int
	// the bar: ok, unsupported and error rows and what is missing, as % of requested
	OKPct, UnsupPct, ErrPct, MissPct float64
	Coverage                         string
	Phase, Reason, Log, LogTail      string // why the shard did not succeed ("" when it did)
}

// shardRows is the coverage table: every shard of the manifest, with the reason of each
// that did not succeed. It returns how many did not.
func shardRows(run *results.Run) ([]shardRow, int) {
	var rows []shardRow
	failures := 0
	for _, s := range run.Shards {
		a := ""
		if s.HasAttempt {
			a = strconv.Itoa(s.Attempt)
		}
		row := shardRow{ID: s.ID, Status: s.Status, Cluster: dash(s.Cluster), Runner: dash(s.Runner),
			Backends: dash(strings.Join(s.Backends, ", ")), Attempt: dash(a), Exit: dash(s.ExitCode),
			WorldSize: dash(strings.TrimPrefix(strconv.Itoa(s.WorldSize), "0")), Requested: s.RequestedShapes, OK: s.OK,
			Unsupported: s.Unsupported, Error: s.Error}
		produced := s.OK + s.Unsupported + s.Error
		if n := float64(max(s.RequestedShapes, produced)); n > 0 {
			row.OKPct, row.UnsupPct, row.ErrPct = 100*float64(s.OK)/n, 100*float64(s.Unsupported)/n, 100*float64(s.Error)/n
			row.MissPct = max(0, 100-row.OKPct-row.UnsupPct-row.ErrPct)
		}
		row.Coverage = fmt.Sprintf("%d ok, %d unsupported, %d error of %d requested", s.OK, s.Unsupported, s.Error, s.RequestedShapes)
		if !verdict.Good(s.Status) {
			failures++
			row.Phase, row.Reason, row.Log = explain(&s)
			if row.Log != "" {
				row.LogTail = tail(filepath.Join(s.Dir, row.Log), 25)
				if rel, err := filepath.Rel(run.Dir, filepath.Join(s.Dir, row.Log)); err == nil {
					row.Log = rel
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, failures
}

// explain says why a shard did not succeed: the phase, the reason, and the log to read
// (a file in the shard's directory, "" when none).
func explain(s *results.Shard) (phase, reason, log string) {
	exists := func(name string) string {
		if fi, err := os.Stat(filepath.Join(s.Dir, name)); err == nil && fi.Mode().IsRegular() {
			return name
		}
		return ""
	}
	switch {
	case s.Dir == "":
		return "—", "no execution of this shard is in the artifacts: it never ran, or its artifact was not uploaded", ""
	case !s.HasStatus:
		return "cleanup", "no status.json: execute was killed, or its cleanup failed (the allocation could not be confirmed gone); finalize or recover repeats it", exists("cleanup.log")
	case s.FailPhase != "":
		return s.FailPhase, s.FailMessage, exists(s.FailLog)
	case s.ExitCode != "0":
		return "benchmark", "exit status " + s.ExitCode, exists("benchmark.log")
	case s.Error > 0:
		return "benchmark", fmt.Sprintf("%d error row(s): see Errors below", s.Error), exists("benchmark.log")
	case s.OK+s.Unsupported < s.RequestedShapes:
		return "benchmark", fmt.Sprintf("the harness exited 0 without answering every case (%d ok and %d unsupported rows of %d requested)", s.OK, s.Unsupported, s.RequestedShapes), exists("benchmark.log")
	case s.OK+s.Unsupported == 0:
		return "benchmark", "the harness exited 0 but wrote no ok or unsupported row", exists("benchmark.log")
	}
	return "—", "", ""
}

// tail is the last n lines of a log (at most 8 KiB of it).
func tail(path string, n int) string {
	f, fi, err := files.OpenRegular(path) // a FIFO there must not hang the report
	if err != nil {
		return ""
	}
	defer f.Close()
	const most = 8 << 10
	if fi.Size() > most {
		f.Seek(fi.Size()-most, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, most))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if fi.Size() > most && len(lines) > 1 {
		lines = lines[1:] // the first was cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.ToValidUTF8(strings.Join(lines, "\n"), "\uFFFD")
}

// attempts lists the attempts the chosen executions come from.
func attempts(run *results.Run) string {
	var out []string
	seen := map[int]bool{}
	for _, s := range run.Shards {
		if s.HasAttempt && !seen[s.Attempt] {
			seen[s.Attempt] = true
			out = append(out, strconv.Itoa(s.Attempt))
		}
	}
	sort.Strings(out)
	return dash(strings.Join(out, ", "))
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
		{"Benchmark runs", safe.Trunc(j(runs), 2000)},
	}
	for _, k := range slices.Sorted(maps.Keys(software)) {
		kvs = append(kvs, kv{"Software: " + k, j(software[k])})
	}
	var rows []imageRow
	for _, k := range imgOrder {
		image, digest := k.image, k.digest
		if image == "" {
			image = "none (no container)"
		}
		rows = append(rows, imageRow{image, dash(digest), safe.Trunc(strings.Join(images[k], ", "), 2000)})
	}
	return kvs, rows
}
