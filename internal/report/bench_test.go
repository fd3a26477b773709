package report

import (
	"path/filepath"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// BenchmarkPacked packs the page's data (made in pieces on every core, compressed in
// order) of the bench tree (testenv.BenchTree), its rows gathered once.
func BenchmarkPacked(b *testing.B) {
	dir := testenv.BenchTree(b)
	bl, _, err := gather(b.Context(), filepath.Join(dir, "manifest.json"), filepath.Join(dir, "artifacts"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := bl.packed(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
