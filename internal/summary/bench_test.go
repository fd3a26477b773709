package summary

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSummarizeTree summarizes the tree scripts/bench-summarize.sh builds
// (OPX_BENCH_DIR=dir scripts/bench-summarize.sh keeps it; then point OPX_SUMMARY_TREE at it).
func BenchmarkSummarizeTree(b *testing.B) {
	dir := os.Getenv("OPX_SUMMARY_TREE")
	if dir == "" {
		b.Skip("OPX_SUMMARY_TREE is not set")
	}
	for b.Loop() {
		if _, err := Summarize(context.Background(), filepath.Join(dir, "manifest.json"), filepath.Join(dir, "artifacts")); err != nil {
			b.Fatal(err)
		}
	}
}
