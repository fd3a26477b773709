package counters

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// real is a published capture in testdata/real-samples (its README names the source and
// license of each).
func real(name string) string { return filepath.Join("..", "..", "testdata", "real-samples", name) }

// Every published ncu CSV is read the way its file says, and every field opx takes from
// it is the file's (the values below are read off the files by eye): the 2025 details
// page (a trailing comma on each metric row, rule rows, units opx does not use such as
// register/thread and SM), the 2026 --metrics page saved on Windows (a BOM, CRLF, a
// preamble with commas, thousands separators) and the 2020 nv-nsight-cu-cli page (old
// spellings: nsecond, cycle/second, "SM [%]"). What a file does not report stays unknown.
func TestRealNCUSamples(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		file                    string
		timeNS, read, write, l2 float64
		busy, tensor            float64
	}{
		// Duration 406240 ns, Compute (SM) Throughput 23.59 %; no L2 hit rate, no DRAM bytes
		{"ncu-superbenchmark-cublaslt-sm100.csv", 406240, nan, nan, nan, 23.59, nan},
		// Duration 4672 nsecond, L2 Hit Rate 76.32 %, SM [%] 0.00
		{"ncu-xplacer-gaussian-lassen-v100.csv", 4672, nan, nan, 76.32, 0, nan},
		// gpu__time_duration.sum "10,195,552" ns, dram__bytes_op_read.sum "53,261,312" byte,
		// dram__bytes_op_write.sum "3,377,920" byte, lts__t_sector_hit_rate.pct 87.50,
		// sm__throughput.avg.pct_of_peak_sustained_elapsed 88.90
		{"ncu-gpurooflineprofiler-gemm-tiled-rtx5070-win.csv", 10195552, 53261312, 3377920, 87.5, 88.9, nan},
	} {
		f, err := os.Open(real(c.file))
		if err != nil {
			t.Fatal(err)
		}
		ks, err := ncuKernels(f)
		f.Close()
		if err != nil || len(ks) != 1 {
			t.Errorf("%s: %d kernels, %v; want the one kernel it profiles", c.file, len(ks), err)
			continue
		}
		if ks[0].index != -1 {
			t.Errorf("%s: kernel joined to op %d, though no opx range names it", c.file, ks[0].index)
		}
		k := ncuKernel(ks[0].metrics)
		same := func(what string, got float64, has bool, want float64) {
			if math.IsNaN(want) != !has || has && math.Abs(got-want) > 1e-9*math.Max(1, want) {
				t.Errorf("%s: %s = %v (reported %v), the file says %v", c.file, what, got, has, want)
			}
		}
		same("kernel time (ns)", k.timeNS, k.hasTime, c.timeNS)
		same("DRAM read (bytes)", k.read, k.hasRead, c.read)
		same("DRAM write (bytes)", k.write, k.hasWrite, c.write)
		same("L2 hit rate (%)", k.l2HitPct, k.hasL2, c.l2)
		same("SM throughput (%)", k.busyPct, !math.IsNaN(k.busyPct), c.busy)
		same("tensor pipe (%)", k.tensorPct, !math.IsNaN(k.tensorPct), c.tensor)
		// the whole reader: its kernel is outside any opx range, counted so, no case
		f, _ = os.Open(real(c.file))
		res := &Result{Cases: map[int]*Case{}}
		if err := ReadNCU(f, res); err != nil || res.Unranged != 1 || len(res.Cases) != 0 {
			t.Errorf("%s: ReadNCU: %v, %d unranged, %d cases", c.file, err, res.Unranged, len(res.Cases))
		}
		f.Close()
	}
}

// A unit opx does not know is an error only on a metric opx uses: on any other it is
// passed over, and the file's other counters are kept.
func TestUnknownUnitOnlyMattersWhereUsed(t *testing.T) {
	head := "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
	ks, err := ncuKernels(strings.NewReader(head + "\"0\",\"k\",\"Registers Per Thread\",\"register/thread\",\"168\"\n\"0\",\"k\",\"gpu__time_duration.sum\",\"ns\",\"5\"\n"))
	if err != nil || len(ks) != 1 || ks[0].metrics["gpu__time_duration.sum"] != 5 {
		t.Errorf("an unknown unit on a metric opx does not use: %v %+v", err, ks)
	}
	if _, err := ncuKernels(strings.NewReader(head + "\"0\",\"k\",\"gpu__time_duration.sum\",\"fortnight\",\"5\"\n")); err == nil {
		t.Errorf("an unknown unit on the kernel time was taken")
	}
}

// A rate reported without kernel times (a profile of rates alone) is the kernels' plain
// mean, not unknown for want of a weight; with times it is weighted by them.
func TestRatesWithoutTimes(t *testing.T) {
	untimed := combine("ncu", []kernel{{l2HitPct: 80, hasL2: true, tensorPct: math.NaN(), busyPct: 40}, {l2HitPct: 60, hasL2: true, tensorPct: math.NaN(), busyPct: 20}})
	if untimed.L2HitPct != 70 || untimed.BusyPct != 30 || !math.IsNaN(untimed.KernelTimeUS) {
		t.Errorf("rates without times: L2 %v, busy %v, time %v", untimed.L2HitPct, untimed.BusyPct, untimed.KernelTimeUS)
	}
	timed := combine("ncu", []kernel{{l2HitPct: 80, hasL2: true, timeNS: 3, hasTime: true, tensorPct: math.NaN(), busyPct: math.NaN()},
		{l2HitPct: 60, hasL2: true, timeNS: 1, hasTime: true, tensorPct: math.NaN(), busyPct: math.NaN()}})
	if timed.L2HitPct != 75 {
		t.Errorf("rates with times: L2 %v, want 75 (weighted 3:1)", timed.L2HitPct)
	}
}

// Both published rocprofv3 kernel traces are read by their headers: the early column set
// (no Dispatch_Id: its dispatches named by Correlation_Id) and the rocpd one (a Guid
// column, "Agent 4" ids). Each of the nine dispatches is one dispatch with its own
// time, End_Timestamp - Start_Timestamp.
func TestRealRocprofTraces(t *testing.T) {
	for _, c := range []struct {
		file      string
		firstTime float64
	}{
		{"rocprofv3-hpctrainingexamples-openmp-kernel-trace-mi300a.csv", 5329321973322123 - 5329321973213203},
		{"rocprofv3-hpctrainingexamples-rocpd-kernel-trace-mi300a.csv", 1678314003082277 - 1678314002982197},
	} {
		rows, err := readCSV(context.Background(), real(c.file))
		if err != nil || len(rows) != 9 {
			t.Errorf("%s: %d rows, %v", c.file, len(rows), err)
			continue
		}
		ids := map[string]bool{}
		for i, r := range rows {
			start, ok1 := number(r["Start_Timestamp"])
			end, ok2 := number(r["End_Timestamp"])
			if !ok1 || !ok2 || end <= start {
				t.Errorf("%s row %d: start %v end %v", c.file, i, r["Start_Timestamp"], r["End_Timestamp"])
			}
			if i == 0 && end-start != c.firstTime {
				t.Errorf("%s: the first dispatch took %v ns, the file says %v", c.file, end-start, c.firstTime)
			}
			ids[dispatchID(r)] = true
		}
		if len(ids) != 9 {
			t.Errorf("%s: %d distinct dispatches of 9 (%v)", c.file, len(ids), ids)
		}
	}
}
