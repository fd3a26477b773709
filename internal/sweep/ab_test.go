package sweep

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/shard"
)

// The run's A/B report: a shard that failed after some rounds has its judged cases lost,
// saying why (a side that crashed in a later round is no green check); a case no shard
// judged is missing and lost.
func TestABReportOfAFailedShard(t *testing.T) {
	dir := t.TempDir()
	o := Options{Plan: plan.Request{Runner: "local", Backends: "cpu", Testlists: "cpu_smoke", WorldSizes: "1", RunID: "1", Attempt: "1", SourceSHA: "abc", ChunkSize: 500, Mode: "timing"},
		Stderr: io.Discard, AB: &shard.AB{Base: shard.Side{Label: "base"}, Head: shard.Side{Label: "head"}, Rules: ab.Defaults}}
	s := newSweep(t.Context(), o, dir)
	s.p.Out = s.mpath
	if err := plan.Run(t.Context(), &s.p, io.Discard, io.Discard, false); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(t.Context(), s.mpath)
	if err != nil || len(m.Cells) != 1 {
		t.Fatalf("%v %d cells", err, len(m.Cells))
	}
	cell := m.Cells[0]
	out := filepath.Join(s.shards, cell.ID)
	os.MkdirAll(out, 0o755)
	// the shard judged one case in 8 rounds (the same), then its head crashed
	res := ab.Result{Pairs: 8, Ratio: 1, Lo: 0.99, Hi: 1.01, Verdict: ab.Same}
	var key string
	if err := s.abFamily(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep, _ := s.abReport(t.Context())
	for _, c := range rep.Cases {
		if strings.Contains(c.Key, "fp32") {
			key = c.Key
			break
		}
	}
	if key == "" || len(rep.Cases) != 6 || !rep.Cases[0].Lost {
		t.Fatalf("with no shard output: %+v", rep.Cases)
	}
	if err := (ab.Report{Rules: ab.Defaults, Cases: []ab.Case{{Key: key, Outcome: "measured", Result: res}}}).Write(filepath.Join(out, shard.ABFile)); err != nil {
		t.Fatal(err)
	}
	if err := manifest.WriteStatus(filepath.Join(out, manifest.StatusFile), 1, []string{}, &manifest.Failure{Phase: "benchmark", Message: "A/B round 9, head: rank 0 exited 139"}); err != nil {
		t.Fatal(err)
	}
	rep, err = s.abReport(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Cases {
		switch {
		case c.Key == key && (!c.Lost || c.Outcome != "measured, but its shard failed: A/B round 9, head: rank 0 exited 139"):
			t.Errorf("the judged case of a failed shard: %+v", c)
		case c.Key != key && (!c.Lost || !strings.HasPrefix(c.Outcome, "missing: shard "+cell.ID+" judged no pair of it (its shard failed")):
			t.Errorf("an unjudged case: %+v", c)
		}
	}
	if conc, _ := rep.Conclusion(); conc != "failure" {
		t.Errorf("conclusion %s", conc)
	}
	if rep.Rules.Cases != 6 {
		t.Errorf("the family: %d cases, want the 6 planned", rep.Rules.Cases)
	}
}
