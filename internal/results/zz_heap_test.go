package results

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

func TestZZHeap(t *testing.T) {
	if os.Getenv("OPX_ZZ") == "" {
		t.Skip()
	}
	run, err := Cover(context.Background(), "/tmp/bench/manifest.json", "/tmp/bench/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	f, _ := os.Create("/tmp/heap.prof")
	pprof.WriteHeapProfile(f)
	f.Close()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap inuse %d MiB, sys %d MiB, cases %d", ms.HeapInuse>>20, ms.Sys>>20, len(casesOf(run.Ledger)))
	runtime.KeepAlive(run)
}
