package changes

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// The tables hold what a fresh simulation (another seed) finds: at the kept quantiles
// around the levels used (0.1%–2%), the chance of a value as extreme is the table's within
// five standard errors of both simulations. A table from another statistic, a changed
// robustSD or tailStat, or quantiles read off by one fail it.
func TestCalibrationTable(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates")
	}
	const r = 100_000
	within := func(what string, got, want float64, tableR int) {
		t.Helper()
		se := math.Sqrt(want*(1-want)/r) + math.Sqrt(want*(1-want)/float64(tableR))
		if math.Abs(got-want) > 5*se {
			t.Errorf("%s: a fresh simulation gives %.5f, the table %.5f", what, got, want)
		}
	}
	for _, n := range []int{12, 20, 40, 60} {
		stats := levelStats(n, r, 99) // another seed than the table's
		slices.Sort(stats)
		for _, x := range levelTable[gridAt(LevelNs, n)][3:8] {
			k, _ := slices.BinarySearch(stats, x.Q) // below x.Q
			within("level n="+strconv.Itoa(n), float64(r-k)/r, x.P, levelRounds)
		}
	}
	for _, n := range []int{4, 8, 20, 60} {
		qs := tailTable[gridAt(TailNs, n)]
		for t, stats := range tailStats(n, r, 99) {
			slices.Sort(stats)
			for _, x := range qs[t][3:8] {
				k, _ := slices.BinarySearch(stats, x.Q) // below x.Q
				within("tail n="+strconv.Itoa(n)+" k="+strconv.Itoa(Tails[t]), float64(r-k)/r, x.P, tailRounds)
			}
		}
	}
}

// levelP and tailP read the tables: at a kept quantile they give its chance, between two
// they lie between theirs, and they fall as the statistic grows more extreme.
func TestCalibratedP(t *testing.T) {
	q := levelTable[gridAt(LevelNs, 30)]
	if p := levelP(q[5].Q, 30); p != q[5].P {
		t.Errorf("levelP at a kept quantile: %v, want %v", p, q[5].P)
	}
	if p := levelP((q[5].Q+q[6].Q)/2, 30); p < q[5].P || p > q[6].P {
		t.Errorf("levelP between two quantiles: %v, not within [%v, %v]", p, q[5].P, q[6].P)
	}
	if levelP(q[0].Q*2, 30) >= q[0].P || levelP(0, 30) != 1 {
		t.Errorf("levelP beyond the table")
	}
	tq := tailTable[gridAt(TailNs, 10)][0]
	if p := tailP(tq[4].Q, 10, 1); p != tq[4].P {
		t.Errorf("tailP at a kept quantile: %v, want %v", p, tq[4].P)
	}
	if tailP(tq[0].Q*2, 10, 1) >= tq[0].P || tailP(0, 10, 1) != 1 {
		t.Errorf("tailP beyond the table")
	}
	// a length between two simulated ones is read at the one below: the conservative side
	if gridAt(LevelNs, 70) != slices.Index(LevelNs, 64) || gridAt(TailNs, 1000) != len(TailNs)-1 {
		t.Errorf("gridAt")
	}
}
