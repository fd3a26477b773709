package counters

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// want is op 0 and op 1 of every fixture, worked out by hand: op 0's two kernels (12 and
// 4 µs; 8.39 + 1.05 MB read; 2,097.15 KB written; 35,000 of 50,000 L2 lookups hit; tensor
// 80 % and 0 %, SM 90 % and 40 %, weighted by time), op 1's one.
func checkNVIDIA(t *testing.T, name string, res *Result) {
	t.Helper()
	if len(res.Cases) != 2 || res.Unranged != 1 || len(res.Problems) != 0 {
		t.Fatalf("%s: %d cases, %d unranged, problems %q", name, len(res.Cases), res.Unranged, res.Problems)
	}
	c := res.Cases[0]
	if c.Kernels != 2 || !near(c.KernelTimeUS, 16) || !near(c.DRAMRead, 9.44e6) || !near(c.DRAMWrite, 2097150) ||
		!near(c.L2HitPct, 70) || !near(c.TensorPct, 60) || !near(c.BusyPct, 77.5) || c.Source != "ncu" {
		t.Errorf("%s op 0: %+v", name, *c)
	}
	c = res.Cases[1]
	if c.Kernels != 1 || !near(c.KernelTimeUS, 20) || !near(c.DRAMRead, 33.55e6) || !near(c.DRAMWrite, 16.78e6) ||
		!near(c.L2HitPct, 25) || !near(c.TensorPct, 65.5) || !near(c.BusyPct, 85) || !near(c.Bytes(), 50.33e6) {
		t.Errorf("%s op 1: %+v", name, *c)
	}
}

func TestNCUVersionsAndPages(t *testing.T) {
	for _, f := range []string{"ncu-2022.4-details.csv", "ncu-2024.1-details.csv", "ncu-2024.1-raw.csv"} {
		file, err := os.Open(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		res := &Result{Cases: map[int]*Case{}}
		if err := ReadNCU(file, res); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		file.Close()
		checkNVIDIA(t, f, res)
	}
}

func TestNCUWithoutAHeaderIsAProblemNotAPanic(t *testing.T) {
	res := &Result{Cases: map[int]*Case{}}
	err := ReadNCU(strings.NewReader("==PROF== Connected to process 1\n==ERROR== The application returned an error code (1).\n"), res)
	if err == nil || !strings.Contains(err.Error(), "no ncu CSV header") {
		t.Errorf("err %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ncu-rank0.csv"), []byte("==PROF== Target process 7 terminated before first instrumented API call.\n"), 0o644)
	r := Read(t.Context(), dir)
	if len(r.Problems) != 1 || len(r.Cases) != 0 {
		t.Errorf("a broken file: %+v", r)
	}
}

// rocprofv3: the same two ops over three passes (fetch, hm, wom); FETCH_SIZE and
// WRITE_SIZE are kilobytes; a dispatch belongs to the range it started in.
func TestRocprofv3Passes(t *testing.T) {
	res := Read(t.Context(), "testdata") // the ncu fixtures are not rank 0's, so only rocprofv3 is read
	if len(res.Cases) != 2 || res.Unranged != 1 || len(res.Problems) != 0 {
		t.Fatalf("%d cases, %d unranged, problems %q", len(res.Cases), res.Unranged, res.Problems)
	}
	c := res.Cases[0]
	if c.Kernels != 2 || !near(c.KernelTimeUS, 16) || !near(c.DRAMRead, 9216*1024) || !near(c.DRAMWrite, 2048*1024) ||
		!near(c.L2HitPct, 70) || !near(c.TensorPct, 60) || !math.IsNaN(c.BusyPct) || c.Source != "rocprofv3" {
		t.Errorf("op 0: %+v", *c)
	}
	c = res.Cases[1]
	if c.Kernels != 1 || !near(c.KernelTimeUS, 20) || !near(c.DRAMRead, 32768*1024) || !near(c.DRAMWrite, 16384*1024) ||
		!near(c.L2HitPct, 25) || !near(c.TensorPct, 65.5) {
		t.Errorf("op 1: %+v", *c)
	}
}

func TestRocprofPassWithoutMarkers(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "fetch"), 0o755)
	os.WriteFile(filepath.Join(dir, "fetch", "rank0_kernel_trace.csv"), []byte("\"Dispatch_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n\"1\",\"10\",\"20\"\n"), 0o644)
	r := Read(t.Context(), dir)
	if len(r.Cases) != 0 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "without its marker or kernel trace") {
		t.Errorf("%+v", r)
	}
}

// A FIFO, a directory or a link to /dev/zero in place of a counters file is a problem
// said, not a read that never ends (issue 30).
func TestSpecialFilesAreProblemsNotHangs(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero", "dir"} {
		dir := t.TempDir()
		p := filepath.Join(dir, "ncu-rank0.csv")
		switch kind {
		case "fifo":
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		case "devzero":
			os.Symlink("/dev/zero", p)
		case "dir":
			os.MkdirAll(filepath.Join(dir, "pass_1"), 0o755)
			os.WriteFile(filepath.Join(dir, "pass_1", "rank0_kernel_trace.csv"), nil, 0o644)
			syscall.Mkfifo(filepath.Join(dir, "pass_1", "rank0_marker_api_trace.csv"), 0o644)
		}
		done := make(chan *Result, 1)
		go func() { done <- Read(t.Context(), dir) }()
		select {
		case r := <-done:
			if len(r.Problems) == 0 {
				t.Errorf("%s: no problem said", kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: reading the counters hangs", kind)
		}
	}
}

// Newer Nsight Compute writes times as ns, us, ms (older: nsecond, usecond, msecond) and
// rates as byte/s: read as the same figures (a us read as ns was 1000x off; issue 32).
// A unit opx does not know is an error naming it, never a value taken as it is.
func TestNCUUnits(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "ncu-2024.1-details.csv"))
	if err != nil {
		t.Fatal(err)
	}
	short := strings.NewReplacer(`"nsecond"`, `"ns"`, `"usecond"`, `"us"`, `"msecond"`, `"ms"`).Replace(string(b))
	if short == string(b) {
		t.Fatal("the fixture has no long time units to shorten")
	}
	res := &Result{Cases: map[int]*Case{}}
	if err := ReadNCU(strings.NewReader(short), res); err != nil {
		t.Fatal(err)
	}
	checkNVIDIA(t, "short units", res)
	for unit, want := range map[string]float64{"byte/s": 1, "Gbyte/second": 1e9, "Kbyte/usecond": 1e9, "cycle/nsecond": 1e9, "inst/cycle": 1, "Ghz": 1e9, "us": 1e3, "Mbyte": 1e6} {
		if got, err := scale(unit); err != nil || got != want {
			t.Errorf("scale(%q) = %v, %v; want %v", unit, got, err, want)
		}
	}
	bad := strings.Replace(string(b), `"usecond"`, `"fortnight"`, 1)
	if err := ReadNCU(strings.NewReader(bad), &Result{Cases: map[int]*Case{}}); err == nil || !strings.Contains(err.Error(), `unknown unit "fortnight"`) {
		t.Errorf("an unknown unit: %v", err)
	}
}

// Newer Nsight Compute details pages carry rule columns after the metric's (the header
// longer than a metric's row, and rows of rules with no metric): records are read by the
// header's names, so no metric row is dropped (the L2 hit rate was lost; issue 32). A
// kernel time no row gives is unknown (NaN: empty in exports), never 0.
func TestNCURuleColumnsAndUnmeasuredTime(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "ncu-2024.1-details.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var withRules []string
	for _, l := range lines {
		if strings.HasPrefix(l, `"ID",`) {
			l += `,"Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"`
		}
		withRules = append(withRules, l)
		if strings.Contains(l, `"gpu__time_duration.sum"`) && strings.HasPrefix(l, `"0",`) {
			// a rule's row after the kernel's metrics: its ids, no metric, the rule's words
			withRules = append(withRules, `"0","5151","python3.12","127.0.0.1","opx0","1","7","(128, 1, 1)","(132, 1, 1)","0","9.0","SpeedOfLight","","","","SOLBottleneck","OPT","This kernel is memory bound","local","12.5"`)
		}
	}
	res := &Result{Cases: map[int]*Case{}}
	if err := ReadNCU(strings.NewReader(strings.Join(withRules, "\n")), res); err != nil {
		t.Fatal(err)
	}
	checkNVIDIA(t, "rule columns", res)

	var untimed []string
	for _, l := range lines {
		if !strings.Contains(l, `"gpu__time_duration.sum"`) {
			untimed = append(untimed, l)
		}
	}
	res = &Result{Cases: map[int]*Case{}}
	if err := ReadNCU(strings.NewReader(strings.Join(untimed, "\n")), res); err != nil {
		t.Fatal(err)
	}
	if c := res.Cases[1]; c == nil || !math.IsNaN(c.KernelTimeUS) || !near(c.DRAMRead, 33.55e6) {
		t.Errorf("a kernel time no row gives: %+v", c)
	}
}

// A dispatch belongs to the range whose start and end contain it: one that starts after
// op 0's range ended (and before op 1's began) is no kernel of op 0 (issue 32: it was
// credited to the range that started last).
func TestRocprofJoinsByTheWholeRange(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "rocprofv3"))); err != nil {
		t.Fatal(err)
	}
	// op 0's range now ends (1014050) before its second kernel (1014100-1018100) starts, in every pass
	marks, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*", "rank0_marker_api_trace.csv"))
	for _, m := range marks {
		b, _ := os.ReadFile(m)
		os.WriteFile(m, []byte(strings.Replace(string(b), `"1001000","1019000"`, `"1001000","1014050"`, 1)), 0o644)
	}
	res := &Result{Cases: map[int]*Case{}}
	if err := ReadRocprof(t.Context(), dir, res); err != nil {
		t.Fatal(err)
	}
	if len(marks) == 0 || res.Cases[0] != nil && res.Cases[0].Kernels != 1 || res.Unranged != 2 {
		t.Errorf("%d marker files; op 0: %+v; %d unranged", len(marks), res.Cases[0], res.Unranged)
	}
}

// Real rocprofv3 output: the samples AMD publishes with rocprofiler-sdk's documentation
// (testdata/rocprofiler-sdk-docs; its README names the source), in the names rocprofv3
// gives them under --output-file rank0. They come from separate runs of AMD's examples, so
// no kernel falls in an opx<index> range: what this holds is that every record of each
// real file is read by its header's names, unquoted numbers and 16-digit timestamps too.
func TestRocprofv3SamplesOfTheSDK(t *testing.T) {
	src := filepath.Join("testdata", "rocprofiler-sdk-docs")
	root := t.TempDir()
	pass := filepath.Join(root, "pass", "node", "21228")
	if err := os.MkdirAll(pass, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kernel_trace.csv", "marker_api_trace.csv", "counter_collection.csv"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(pass, "rank0_"+name), b, 0o644)
	}
	// the kernel trace's 8 dispatches, none inside a range of the harness's
	res := Read(t.Context(), root)
	if len(res.Cases) != 0 || res.Unranged != 8 || len(res.Problems) != 0 {
		t.Fatalf("%d cases, %d unranged (want 8), problems %q", len(res.Cases), res.Unranged, res.Problems)
	}
	kernels, err := readCSV(t.Context(), filepath.Join(pass, "rank0_kernel_trace.csv"))
	if err != nil || len(kernels) != 8 {
		t.Fatalf("kernel trace: %d records, %v", len(kernels), err)
	}
	start, ok1 := number(kernels[0]["Start_Timestamp"])
	end, ok2 := number(kernels[0]["End_Timestamp"])
	if !ok1 || !ok2 || end-start != 16157 || kernels[0]["Kernel_Name"] != "void addition_kernel<float>(float*, float const*, float const*, int, int)" || kernels[7]["Dispatch_Id"] != "8" {
		t.Errorf("kernel trace's first record: %v (%v ns)", kernels[0], end-start)
	}
	counters, err := readCSV(t.Context(), filepath.Join(pass, "rank0_counter_collection.csv"))
	if err != nil || len(counters) != 4 {
		t.Fatalf("counter collection: %d records, %v", len(counters), err)
	}
	for _, c := range counters {
		if v, ok := number(c["Counter_Value"]); !ok || v != 16384 || c["Counter_Name"] != "SQ_WAVES" {
			t.Errorf("counter record %v", c)
		}
	}
	markers, err := readCSV(t.Context(), filepath.Join(pass, "rank0_marker_api_trace.csv"))
	if err != nil || len(markers) != 5 || markers[4]["Function"] != "hipLaunchKernel range" || markers[4]["End_Timestamp"] != "1520113901495882" {
		t.Fatalf("marker trace: %d records %v, %v", len(markers), markers, err)
	}
	for _, m := range markers {
		if rangeIndex(m["Function"]) >= 0 {
			t.Errorf("%q read as a harness range", m["Function"])
		}
	}
}
