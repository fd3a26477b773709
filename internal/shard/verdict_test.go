package shard_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/fingerprint"
)

// One run, one answer: every command that reads a run says what internal/verdict says,
// with the same words and exit codes (issue 29's cases, on the local runner's real
// sweeps).
func TestEveryCommandGivesTheVerdict(t *testing.T) {
	opx := func(args ...string) outcome { return run(exec.Command(opxBin, args...)) }
	type ledger struct {
		Complete bool
		Verdict  string
		Reasons  []string
	}
	readLedger := func(dir string) ledger {
		var l ledger
		b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
		if err != nil {
			t.Fatal(err)
		}
		// the head of the ledger is one line of JSON, then its attempts and cases
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		line string // what every command says of the run
	}{
		// cpu_smoke a case a shard: the unsupported cases' shards are answered, not failed
		{"chunk-size 1", []string{"--chunk-size", "1"}, 0, "success: 4 of 6 cases measured, 2 unsupported, 0 error, 0 missing"},
		// every case unsupported on the cpu backend: nothing was measured, and it says why
		{"all unsupported", []string{"--testlists", "gemm_legacy"}, 1,
			"failed: 0 of 7212 cases measured, 7212 unsupported, 0 error, 0 missing; backend cpu measured nothing (7212 unsupported)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, dir := runSweep(t, os.Environ(), c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, "opx run: "+c.line+";") {
				t.Fatalf("opx run: exit %d, want %d and %q\n%s", r.code, c.code, c.line, r.stderr)
			}
			_, _, success := summaryOf(t, dir)
			if success != (c.code == 0) {
				t.Errorf("summary.json success %v", success)
			}
			if l := readLedger(dir); l.Complete != (c.code == 0) || l.Verdict != strings.SplitN(c.line, ":", 2)[0] {
				t.Errorf("cases.json: %+v", l)
			}
			page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
			if !strings.Contains(string(page), `id="verdict">`+c.line+"</p>") {
				t.Errorf("report.html's headline is not the verdict")
			}
			// a local run's hours are this machine's CPU's (issue 32)
			if !strings.Contains(r.stderr, " CPU-hours") || strings.Contains(r.stderr, "GPU-hours") || !strings.Contains(string(page), "<h2>Cases and CPU-hours</h2>") {
				t.Errorf("a local run speaks of GPU-hours")
			}
			// and of the CPU throughout: no GPU in what the page says (issue 48), and the
			// machine's table with its cores and load; the header names the run's time and host
			text := regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]+>`).ReplaceAllString(string(page), " ")
			if i := strings.Index(text, "GPU"); i >= 0 {
				t.Errorf("a local run's page speaks of GPUs: …%s…", text[max(0, i-80):min(len(text), i+40)])
			}
			host, _ := os.Hostname()
			if !strings.Contains(string(page), `<h3 id="nodes">Machine</h3>`) || !strings.Contains(string(page), "<th>Load (1 min)</th>") ||
				!regexp.MustCompile(`<span class="sub">run local · 20\d\d-\d\d-\d\d \d\d:\d\d[^·]* UTC · local on `+regexp.QuoteMeta(host)+` · `).Match(page) {
				t.Errorf("a local run's page lacks its machine table or its time and host")
			}
			out := filepath.Join(t.TempDir(), "summary.json")
			s := opx("summarize", "--manifest", filepath.Join(dir, "operatorx-manifest.json"), "--artifacts", filepath.Join(dir, "shards"), "--out", out)
			if s.code != c.code || !strings.Contains(s.stderr, "opx summarize: "+c.line+";") {
				t.Errorf("summarize: exit %d %q", s.code, s.stderr)
			}
			if c.code == 0 && (!strings.Contains(s.stdout, "| unsupported | 1 | 0 | 1 | 0 |") || strings.Contains(s.stdout, "| failed |")) {
				t.Errorf("summarize's table: a shard of one unsupported case is answered, not failed:\n%s", s.stdout)
			}
			rep := opx("report", dir, "--out", filepath.Join(t.TempDir(), "r.html"))
			if rep.code != c.code || !strings.Contains(rep.stderr, "opx report: run "+c.line+"\n") {
				t.Errorf("report: exit %d %q", rep.code, rep.stderr)
			}
			ex := opx("export", dir, "--out", filepath.Join(t.TempDir(), "x.csv"))
			if ex.code != c.code || !strings.Contains(ex.stderr, "opx export: run "+c.line+"\n") {
				t.Errorf("export: exit %d %q", ex.code, ex.stderr)
			}
			cmp := opx("compare", dir, dir, "--allow-same", "--fail-on-regression", "5")
			if want := "new: nothing measured to compare"; (c.code == 0) != (cmp.code == 0) || (c.code != 0 && !strings.Contains(cmp.stderr, want)) {
				t.Errorf("compare with itself: exit %d %q", cmp.code, cmp.stderr)
			}
		})
	}
}

// Two opx runs measuring on one machine at once each get part of its CPU: a local run
// warns when another holds the machine's measuring claim, its fingerprints name that run,
// and its page marks the rows measured meanwhile; without another run, none of that.
func TestTwoRunsMeasuringOnOneMachine(t *testing.T) {
	env := append(os.Environ(), "TMPDIR="+t.TempDir())
	other, err := fingerprint.StartMeasuring(env, "run 77, shard other-shard, output /elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	r, dir := runSweep(t, env)
	other.Close()
	if r.code != 0 || !strings.Contains(r.stderr, "opx: warning: shard ") || !strings.Contains(r.stderr, "another opx run is measuring on this machine (pid ") ||
		!strings.Contains(r.stderr, ": run 77, shard other-shard, output /elsewhere)") {
		t.Errorf("opx run beside another: exit %d\n%s", r.code, r.stderr)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(page), `<div class="tv">6</div><div class="tl">Rows measured under contention</div>`) ||
		!strings.Contains(string(page), "another opx run measured on this machine at the same time (pid ") {
		t.Errorf("the page does not mark the rows measured beside another run")
	}
	fps, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "fingerprint-before.json"))
	if len(fps) != 1 {
		t.Fatalf("fingerprints %v", fps)
	}
	var fp fingerprint.Fingerprint
	b, _ := os.ReadFile(fps[0])
	if err := json.Unmarshal(b, &fp); err != nil || len(fp.OtherRuns) != 1 || fp.Cores < 1 || len(fp.Load) != 3 {
		t.Errorf("fingerprint: other runs %q, cores %d, load %v (%v)", fp.OtherRuns, fp.Cores, fp.Load, err)
	}

	r, dir = runSweep(t, env)
	page, _ = os.ReadFile(filepath.Join(dir, "report.html"))
	if r.code != 0 || strings.Contains(r.stderr, "warning") || strings.Contains(string(page), "Rows measured under contention") {
		t.Errorf("a run alone is said to share the machine: exit %d\n%s", r.code, r.stderr)
	}
}

// Export rows name their run: run id, source SHA, the attempt's start and the host, in CSV
// and JSON lines, so rows of several runs put together stay apart (issue 48).
func TestExportRowsNameTheirRun(t *testing.T) {
	r, dir := runSweep(t, os.Environ())
	if r.code != 0 {
		t.Fatalf("opx run: exit %d\n%s", r.code, r.stderr)
	}
	var m struct {
		RunID     string `json:"run_id"`
		SourceSHA string `json:"source_sha"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "operatorx-manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil || m.RunID == "" {
		t.Fatalf("manifest: %v", err)
	}
	host, _ := os.Hostname()
	out := filepath.Join(t.TempDir(), "x.jsonl")
	if ex := run(exec.Command(opxBin, "export", dir, "--format", "jsonl", "--out", out)); ex.code != 0 {
		t.Fatalf("export: exit %d %s", ex.code, ex.stderr)
	}
	lines, _ := os.ReadFile(out)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		var row struct {
			RunID     string `json:"run_id"`
			SourceSHA string `json:"source_sha"`
			StartedAt string `json:"started_at"`
			Host      string `json:"host"`
			Attempt   int    `json:"attempt"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		started, err := time.Parse(time.RFC3339, row.StartedAt)
		if row.RunID != m.RunID || row.SourceSHA != m.SourceSHA || err != nil || time.Since(started) > time.Hour || row.Host != host || row.Attempt != 1 {
			t.Errorf("row %+v: want run %s, source %s, a start within the hour, host %s", row, m.RunID, m.SourceSHA, host)
		}
		n++
	}
	if n != 6 {
		t.Errorf("%d rows, want 6", n)
	}
	out = filepath.Join(t.TempDir(), "x.csv")
	if ex := run(exec.Command(opxBin, "export", dir, "--out", out)); ex.code != 0 {
		t.Fatalf("export csv: exit %d %s", ex.code, ex.stderr)
	}
	csv, _ := os.ReadFile(out)
	if !strings.HasPrefix(string(csv), "key,shard,attempt,run_id,source_sha,started_at,host,testlist,") || !strings.Contains(string(csv), ","+m.RunID+","+m.SourceSHA+",") {
		t.Errorf("csv: %.300s", csv)
	}
}
