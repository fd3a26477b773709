package results

import (
	"path/filepath"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// BenchmarkCover reads the tree scripts/bench-summarize.sh builds, as summarize does
// (OPX_BENCH_DIR=dir scripts/bench-summarize.sh keeps it; then point OPX_SUMMARY_TREE at
// it): the manifest, every execution of every shard, every results file, the ledger.
func BenchmarkCover(b *testing.B) {
	dir := testenv.BenchTree(b)
	for b.Loop() {
		if _, err := Cover(b.Context(), filepath.Join(dir, "manifest.json"), filepath.Join(dir, "artifacts")); err != nil {
			b.Fatal(err)
		}
	}
}
