package compare

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// BenchmarkRead reads one side of a comparison from the tree scripts/bench-report.sh
// builds (OPX_SUMMARY_TREE=its OPX_BENCH_DIR): every shard's rows, each kept as the
// compact entry compare joins on.
func BenchmarkRead(b *testing.B) {
	dir := testenv.BenchTree(b)
	for b.Loop() {
		if _, err := Read(b.Context(), filepath.Join(dir, "artifacts"), filepath.Join(dir, "manifest.json"), nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteJSON writes the comparison of that tree's run with itself as --json does.
func BenchmarkWriteJSON(b *testing.B) {
	dir := testenv.BenchTree(b)
	base, nw, err := ReadSame(b.Context(), filepath.Join(dir, "artifacts"), filepath.Join(dir, "manifest.json"), nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	res := Join(base, nw, DefaultOptions)
	for b.Loop() {
		if err := res.WriteJSON(b.Context(), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
