package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// heapFloor is the heap opx lets grow before the collector runs: above it the collector
// keeps its default pace (GOGC=100: a heap twice the live one). 64 MiB, side by side
// against 32 and 128 (docs/speed.md): below it the collector runs too often, above it
// every page the heap grows into is one more page fault.
const heapFloor = 64 << 20

// setHeapFloor sets the collector's goal to GOGC=100's, but never below floor bytes,
// unless GOGC or GOMEMLIMIT says otherwise. The run reader holds a few shards at a time,
// so its live heap is a few megabytes while it parses hundreds: at GOGC=100 alone the
// collector would run every few megabytes (193 times in one summarize of 128,000 cases)
// and hand memory back to the system only to take it again. After each collection the
// goal is set again from the live heap (a finalizer runs once per cycle).
func setHeapFloor(floor uint64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	const minimum = 4 << 20 // the runtime's goal for an empty heap at GOGC=100
	debug.SetGCPercent(int(floor / minimum * 100))
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new([16]byte), func(*[16]byte) {
			metrics.Read(sample)
			debug.SetGCPercent(goalPercent(sample[0].Value.Uint64(), floor))
			arm()
		})
	}
	arm()
}

// goalPercent is the GOGC that makes the collector's goal (live × (1 + GOGC/100)) twice
// the live heap, or floor when that is more.
func goalPercent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return int(floor*100/live) - 100
}
