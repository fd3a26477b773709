package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/verdict"
)

// BenchmarkStoreScale is the store at the largest sweep's size: runs of 128,000 cases (256
// shards x 500) written into SQLite one after another, then check after the newest. It
// reports the seconds per add, the check's seconds, the bytes the file holds per point and
// what it grows by per point after the first run (the series are written once).
// OPX_HISTORY_RUNS sets how many runs (default 10); OPX_HISTORY_KEEP=FILE leaves the store
// there, to time opx history check on it as a user runs it.
//
//	go test ./internal/history -run '^$' -bench StoreScale -benchtime 1x
//	OPX_HISTORY_RUNS=100 OPX_HISTORY_KEEP=/tmp/h100.db go test ./internal/history -run '^$' -bench StoreScale -benchtime 1x -timeout 60m
//	/usr/bin/time -v opx history check --db /tmp/h100.db > /dev/null
func BenchmarkStoreScale(b *testing.B) {
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("OPX_HISTORY_RUNS")); err == nil && n > 0 {
		runs = n
	}
	const cases = 128_000
	for range b.N {
		path := filepath.Join(b.TempDir(), "h.db")
		if keep := os.Getenv("OPX_HISTORY_KEEP"); keep != "" {
			path = keep // left for timing opx history check itself
			os.Remove(path)
		}
		s, err := Open(b.Context(), path, true, 0)
		if err != nil {
			b.Fatal(err)
		}
		var added time.Duration
		var first int64
		for r := range runs {
			rec := &recorded{runID: fmt.Sprintf("nightly-%d", r), attempt: 1, at: day0.AddDate(0, 0, r), sourceSHA: fmt.Sprintf("%040x", r),
				opxVersion: "opx bench", cells: map[string]*pyjson.Object{}}
			rec.origin = rec.at.Format(time.RFC3339Nano)
			for sh := range 256 {
				cell := fmt.Sprintf("cell-%d", sh)
				rec.cells[cell] = pyjson.Obj("id", cell)
				for c := range cases / 256 {
					k := fmt.Sprintf(`gemm_perf | gemm | {"k": %d, "m": %d, "n": 4096, "a": {"dtype": "bf16"}} | vllm | ws=1 | h200-dgxc`, c, sh)
					v := 10 + float64(c%97)
					rec.points = append(rec.points, point{key: k, testlist: "gemm_perf", op: "gemm", args: k[18:60], backend: "vllm", cluster: "h200-dgxc", ws: 1,
						metric: "latency_us", lower: true, outcome: verdict.Measured, value: v, lo: v * 0.99, hi: v * 1.01, spread: true, n: 9, gpuSeconds: 0.42,
						cell: cell, ctx: context_{Node: fmt.Sprintf("node-%d", sh%8), GPU: "NVIDIA H200", Driver: "550.54.15", ImageDigest: "sha256:abc"}})
				}
			}
			start := time.Now()
			if err := s.write(b.Context(), "bench", rec); err != nil {
				b.Fatal(err)
			}
			added += time.Since(start)
			if r == 0 { // the series themselves are written once: what grows is the points
				s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
				st, _ := os.Stat(path)
				first = st.Size()
			}
		}
		start := time.Now()
		f, err := s.Check(b.Context(), CheckOptions{Options: changes.Defaults})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		s.Close()
		st, _ := os.Stat(path)
		b.ReportMetric(added.Seconds()/float64(runs), "s/add")
		b.ReportMetric(took.Seconds(), "s/check")
		b.ReportMetric(float64(st.Size())/float64(runs*cases), "bytes/point")
		if runs > 1 {
			b.ReportMetric(float64(st.Size()-first)/float64((runs-1)*cases), "growth-bytes/point")
		}
		b.ReportMetric(float64(f.Points), "points-checked")
	}
}
