package compare_test

// compare's false-positive rate, measured: the same cpu sweep run twice on this machine
// (A/A) must show a false-call rate of at most 1 % (no more than 3 of its 100 cases called
// faster or slower: see maxAACalls), and the same sweep
// made slower on purpose (OPERATORX_CPU_REPEAT=3: every timed GEMM done three times) must
// be called slower and fail the gate. Real processes end to end: opx run, then opx compare.
//
// The sweeps time each case for 150 ms in 9 rounds over the testlist (OPERATORX_ROUNDS),
// one thread, so that its spread is the range of its rounds' medians: how much it moves
// with the moment of the run. Two runs of the same code are then called apart only when
// all 9 of one's rounds fall outside all 9 of the other's: 2 in 48,620 by chance alone
// (5 rounds: 2 in 252, 0.8 % of cases, which is what the VM showed). Within one process
// timed back to back, the 2-core VM's cases kept a tight spread while moving 1.1-1.8x
// between two identical runs (28-46 of 100 called).
//
// This is a measurement: scripts/test.sh runs it alone, after the rest of the suite, as
// a benchmark would be. With the whole suite running beside it, 9 rounds called 1 and 2
// cases in two sets of 28 A/A pairs (2,800 comparisons each), never 2 in one pair; 7
// rounds called 12 in 45 pairs, up to 3 in one, and 2 of 100 once in CI, alone: the VM's
// speed moves by up to 1.6x for seconds at a time, which a run timed over fewer moments
// cannot tell from a change.
import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

var opxBin string

func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

// aaTestlist is 100 fp32/fp64 GEMMs of 2-13 MFLOP, many enough that 1 % is one case.
// Smaller ones (µs) are bimodal from one process to the next on the 2-core VM (9.7 or
// 17-19 µs for m=48 n=16 k=32, each mode with a tight spread), which no within-run spread
// can know; these take long enough that a run's own spread covers its neighbours.
func aaTestlist(t *testing.T) string {
	dir := t.TempDir()
	var shapes []string
	for _, dt := range []string{"fp32", "fp64"} {
		for _, k := range []int{64, 128} {
			for _, m := range []int{96, 128, 160, 192, 224} {
				for _, n := range []int{96, 128, 160, 192, 224} {
					shapes = append(shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": %d, "k": %d, "a": {"dtype": "%s"}, "b": {"dtype": "%s"}, "out": "%s"}, "sources": []}`, m, n, k, dt, dt, dt))
				}
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "aa.json"), []byte("["+strings.Join(shapes, ",\n")+"]\n"), 0o644)
	return dir
}

func sweep(t *testing.T, tl, out string, env ...string) {
	t.Helper()
	cmd := exec.Command(opxBin, "run", "--out", out, "--testlist-dir", tl, "--testlists", "aa")
	cmd.Env = append(append(os.Environ(), "OPERATORX_MEASURE_S=0.15", "OPERATORX_ROUNDS=9", "OPERATORX_WARMUP_MIN_S=0.005", "GOMAXPROCS=1"), env...) // 150 ms of timing a case, in 9 rounds, one thread
	if r := testenv.Run(cmd); r.Code != 0 {
		t.Fatalf("opx run: exit %d\n%s", r.Code, r.Stderr)
	}
}

// compareRuns compares two runs: its counts by class, the process, and the median
// speed-up of every case with a headline metric.
func compareRuns(t *testing.T, base, nw string, args ...string) (map[string]int, testenv.Outcome, float64) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "compare.json")
	r := testenv.Run(exec.Command(opxBin, append([]string{"compare", base, nw, "--json", js}, args...)...))
	var doc struct {
		Counts map[string]int
		Cases  []struct {
			Class, Args string
			Primary     struct {
				Speedup float64
				BaseLo  float64 `json:"base_lo"`
			}
		}
	}
	b, _ := os.ReadFile(js)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("compare: exit %d %v\n%s", r.Code, err, r.Stderr)
	}
	var moved []string
	var speedups []float64
	for _, c := range doc.Cases {
		if c.Class == "faster" || c.Class == "slower" {
			moved = append(moved, fmt.Sprintf("%.3f (%s)", c.Primary.Speedup, c.Args))
		}
		if c.Primary.Speedup > 0 {
			speedups = append(speedups, c.Primary.Speedup)
		}
	}
	median := 0.0
	if len(speedups) > 0 {
		slices.Sort(speedups)
		median = speedups[len(speedups)/2]
	}
	if len(moved) > 10 {
		moved = append(moved[:10], fmt.Sprintf("and %d more", len(moved)-10))
	}
	t.Logf("speed-ups called: %s; the median case %.3fx", strings.Join(moved, " "), median)
	return doc.Counts, r, median
}

// machineMoved is how far an A/A pair's median case may move before the pair measured the
// machine rather than compare: the same code's cases move together only when the VM's own
// speed changed between the two runs (seen: 4, 9, 24 and 28 of 100 called, every one the
// same way: 0.93-0.95x for the 4, 0.69-0.72x for the 24), while the median of a pair
// taken on a steady machine stays within a few percent of 1. (Taking the two runs at
// once, one per core, was tried: their medians moved more, 0.98-1.16x, one called 33.)
const machineMoved = 0.05

// mostAATries is how many A/A pairs are taken before a machine that keeps changing speed
// fails the test: a pair that measured the machine is taken again, and said so. (On one
// day of this VM 6 of 10 pairs moved: a CI run took three pairs to find a steady one;
// on another, CI at 2122d7a took five: 1.174x, 1.396x, 1.116x and 0.857x, then 0.991x;
// CI at 4dd740e took seven of eight, six moving 0.85-1.13x on an idle VM.)
const mostAATries = 12

// maxAACalls is the most cases of 100 an A/A comparison may call without refuting a false-
// call rate of 1 %: P(4 or more | 1 %) = 1.8 %.
const maxAACalls = 3

func TestCompareAAAndAKnownSlowdown(t *testing.T) {
	tl := aaTestlist(t)
	var a1 string
	var counts map[string]int
	var r testenv.Outcome
	for try := 1; ; try++ {
		dir := t.TempDir()
		a2 := filepath.Join(dir, "a2")
		a1 = filepath.Join(dir, "a1")
		sweep(t, tl, a1)
		sweep(t, tl, a2)
		var median float64
		counts, r, median = compareRuns(t, a1, a2, "--fail-on-regression", "5")
		if math.Abs(median-1) <= machineMoved || try == mostAATries {
			break
		}
		t.Logf("A/A pair %d: the median case moved %.3fx, so the machine's speed changed between the two runs: taking the pair again (%d of %d)", try, median, try+1, mostAATries)
	}
	slow := filepath.Join(t.TempDir(), "slow")
	sweep(t, tl, slow, "OPERATORX_CPU_REPEAT=3")
	cases := 0
	for _, n := range counts {
		cases += n
	}
	called := counts["faster"] + counts["slower"]
	t.Logf("A/A: %d cases, %d called faster or slower (%v)", cases, called, counts)
	// the claim is a false-call rate of at most 1 %. 100 cases are a sample of it: at
	// exactly 1 %, 2 or more calls come in 26 % of runs and 3 or more in 7.9 % (binomial),
	// so those are no evidence against it; 4 or more come in 1.8 % of runs, and fail. A
	// detector at 5 % fails 74 % of runs, at 10 % 99 %. A pair taken while the VM changed
	// speed (machineMoved) is taken again; the last of mostAATries is judged whatever it
	// shows.
	if cases != 100 || called > maxAACalls {
		t.Errorf("A/A: %d of %d cases called faster or slower, more than a 1 %% false-call rate gives but in 1.8 %% of runs (at most %d): %v\n%s", called, cases, maxAACalls, counts, r.Stdout)
	}
	if counts["slower"] == 0 && r.Code != 0 {
		t.Errorf("A/A with no case slower failed the gate: exit %d %s", r.Code, r.Stderr)
	}

	counts, r, _ = compareRuns(t, a1, slow, "--fail-on-regression", "5")
	t.Logf("A against 3x the work: %v", counts)
	// 100 of 100 on an idle VM; 66-93 with the whole suite running beside it (the VM slows
	// by up to 1.6x for seconds at a time, widening some intervals until they overlap)
	if counts["slower"] < 80 || counts["faster"] > 0 || r.Code != 1 {
		t.Errorf("a 3x slowdown: %v, exit %d (want at least 80 of 100 slower and the gate failed)\n%s", counts, r.Code, r.Stdout)
	}
}
