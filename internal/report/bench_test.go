package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/semianalysis/opx/internal/results"
)

// BenchmarkPacked packs the page's data (made in pieces on every core, compressed in
// order) of the tree scripts/bench-report.sh builds (OPX_SUMMARY_TREE=its OPX_BENCH_DIR),
// its rows gathered once.
func BenchmarkPacked(b *testing.B) {
	dir := os.Getenv("OPX_SUMMARY_TREE")
	if dir == "" {
		b.Skip("OPX_SUMMARY_TREE is not set")
	}
	bl := newBuilder()
	var run *results.Run
	err := results.Stream(b.Context(), filepath.Join(dir, "manifest.json"), filepath.Join(dir, "artifacts"), func(r *results.Run) { run = r },
		func(_ *results.Shard, rows []results.Row) error {
			if bl.cases == nil {
				bl.expect(run)
			}
			for i := range rows {
				bl.add(&rows[i])
			}
			return nil
		}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := bl.packed(); err != nil {
			b.Fatal(err)
		}
	}
}
