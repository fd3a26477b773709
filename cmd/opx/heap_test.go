package main

import "testing"

// The collector's goal is twice the live heap, never below the floor (here 128 MiB).
func TestGoalPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live  uint64
		want  uint64 // the goal, MiB
		wantP int
	}{
		{5 * mib, 128, 2460}, {64 * mib, 128, 100}, {300 * mib, 600, 100}, {0, 0, 100},
	} {
		p := goalPercent(c.live, 128*mib)
		if p != c.wantP || c.live > 0 && c.live*uint64(100+p)/100/mib != c.want {
			t.Errorf("live %d MiB: GOGC=%d (goal %d MiB), want %d (%d MiB)", c.live/mib, p, c.live*uint64(100+p)/100/mib, c.wantP, c.want)
		}
	}
}
