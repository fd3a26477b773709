package rank_test

// Nsight Compute, rocprofv3 and the Python harness cannot run here: they are RECORDING
// FAKES on PATH that log their argv and the profiling environment they were given. The
// tests check opx rank's exact command lines in counters mode (docs/compat-spec.md §8) against the
// seed's constants.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/rank"
	"github.com/semianalysis/opx/internal/testenv"
)

const fakeTool = `#!/bin/sh
{ printf '%s' "$(basename "$0")"; for a in "$@"; do printf '\t%s' "$a"; done
  printf '\tENV:%s,%s,%s,%s,%s,%s,%s,RANK=%s,LOCAL_RANK=%s,HOME=%s' "$OPERATORX_PROFILE" "$OPERATORX_PROFILE_MARKERS" "$OPERATORX_PROFILE_ITERS" \
    "$OPERATORX_WARMUP_MIN_S" "$OPERATORX_FIRST_WARMUP_S" "$OPERATORX_COOLDOWN_RATIO" "$OPERATORX_THROTTLE_RETRIES" "$RANK" "$LOCAL_RANK" "$HOME"
  printf '\n'; } >> "$FAKE_TOOL_LOG"
`

var opxBin string

// The rank runs as opx does on the node: the tests run the built binary, and check its
// exit status and what it says.
func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

type outcome = testenv.Outcome

func run(cmd *exec.Cmd) outcome { return testenv.Run(cmd) }

type rankFixture struct {
	dir, bin, stage, log, tmp string
}

// home is the HOME the harness ran with (its private cache), checked to be a fresh
// directory under $TMPDIR named operatorx-<job>-<rank>-<random>.
func (f *rankFixture) home(t *testing.T, call []string) string {
	t.Helper()
	last := call[len(call)-1]
	i := strings.Index(last, "HOME=")
	if i < 0 {
		t.Fatalf("no HOME in %q", last)
	}
	home := last[i+5:]
	if !strings.HasPrefix(home, f.stage+"/operatorx-9876-1-") || len(home) <= len(f.stage+"/operatorx-9876-1-") {
		t.Fatalf("the rank's cache %s is not a fresh operatorx-9876-1-<random> in the stage %s", home, f.stage)
	}
	return home
}

func newRankFixture(t *testing.T, tools ...string) *rankFixture {
	f := &rankFixture{dir: t.TempDir()}
	f.bin, f.stage, f.log = filepath.Join(f.dir, "bin"), filepath.Join(f.dir, "stage"), filepath.Join(f.dir, "tools.log")
	f.tmp = filepath.Join(f.dir, "tmp") // the rank's private cache is made under $TMPDIR
	os.MkdirAll(f.tmp, 0o755)
	os.MkdirAll(f.bin, 0o755)
	os.MkdirAll(filepath.Join(f.stage, "results"), 0o755)
	for _, tool := range append(tools, "python3") {
		os.WriteFile(filepath.Join(f.bin, tool), []byte(fakeTool), 0o755)
	}
	return f
}

func (f *rankFixture) rank(extra ...string) outcome {
	cmd := exec.Command(opxBin, "rank")
	cmd.Env = append([]string{"PATH=" + f.bin + ":/usr/bin:/bin", "FAKE_TOOL_LOG=" + f.log, "OPX_STAGE=" + f.stage,
		"SLURM_PROCID=1", "SLURM_LOCALID=1", "WORLD_SIZE=2", "SLURM_JOB_ID=9876", "OPERATORX_MODE=counters",
		"OPERATORX_BACKENDS=vllm", "PYTHONPATH=/image/lib::/opx/source", "TMPDIR=" + f.tmp}, extra...)
	return run(cmd)
}

func (f *rankFixture) calls() [][]string {
	b, _ := os.ReadFile(f.log)
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, strings.Split(l, "\t"))
		}
	}
	return out
}

const profEnv = "ENV:1,1,1,0,0,0,0,RANK=1,LOCAL_RANK=1,HOME="

func TestRankCountersRocprofTwelvePasses(t *testing.T) {
	f := newRankFixture(t, "rocprofv3")
	if r := f.rank(); r.Code != 0 {
		t.Fatalf("rank: exit %d %s", r.Code, r.Stderr)
	}
	calls := f.calls()
	if len(calls) != len(rank.RocprofPasses) {
		t.Fatalf("%d rocprofv3 calls, want %d", len(calls), len(rank.RocprofPasses))
	}
	py := filepath.Join(f.bin, "python3")
	home := f.home(t, calls[0])
	for i, p := range rank.RocprofPasses {
		results := f.stage + "/results"
		if i > 0 { // rows come from the first pass only
			results = home + "/results-" + p[0]
		}
		want := append([]string{"rocprofv3", "--pmc"}, strings.Fields(p[1])...)
		want = append(want, "--kernel-trace", "--marker-trace", "--output-format", "csv", "-d", f.stage+"/results/counters/"+p[0], "-o", "rank1", "--",
			py, "-m", "operatorx", "--strict", "--testlist-dir", f.stage+"/testlists", "--results-dir", results, profEnv+home)
		if !slices.Equal(calls[i], want) {
			t.Errorf("pass %d (%s)\n got %q\nwant %q", i, p[0], calls[i], want)
		}
	}
	if fi, err := os.Stat(f.stage + "/results/counters"); err != nil || !fi.IsDir() {
		t.Error("results/counters was not created")
	}
}

func TestRankCountersNCU(t *testing.T) {
	f := newRankFixture(t)
	ncu := filepath.Join(f.dir, "nsight-compute", "2025.1.0", "ncu")
	os.MkdirAll(filepath.Dir(ncu), 0o755)
	os.WriteFile(ncu, []byte(fakeTool), 0o755)
	if r := f.rank("OPERATORX_NCU=" + ncu); r.Code != 0 {
		t.Fatalf("rank: exit %d %s", r.Code, r.Stderr)
	}
	calls := f.calls()
	if len(calls) != 1 {
		t.Fatalf("ncu calls %q", calls)
	}
	want := []string{"ncu", "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include", "regex:opx[0-9]+/", "--print-nvtx-rename", "kernel",
		"--metrics", rank.NCUMetrics, "--csv", "--log-file", f.stage + "/results/counters/ncu-rank1.csv",
		filepath.Join(f.bin, "python3"), "-m", "operatorx", "--strict", "--testlist-dir", f.stage + "/testlists", "--results-dir", f.stage + "/results", profEnv + f.home(t, calls[0])}
	if !slices.Equal(calls[0], want) {
		t.Fatalf("ncu call\n got %q\nwant %q", calls, want)
	}
	if n := len(strings.Split(rank.NCUMetrics, ",")); n != 37 {
		t.Errorf("%d ncu metrics, want the seed's 37", n)
	}
}

func TestRankErrors(t *testing.T) {
	f := newRankFixture(t)
	r := f.rank()
	want := "opx: counters mode needs ncu: none in the image, and the node has none under /opt/nvidia/nsight-compute, /usr/local/cuda*/nsight-compute* or on PATH\n"
	if r.Code != 1 || r.Stderr != want {
		t.Errorf("no ncu: exit %d %q", r.Code, r.Stderr)
	}
	cmd := exec.Command(opxBin, "rank")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SLURM_LOCALID=0", "WORLD_SIZE=1"}
	if r := run(cmd); r.Code != 1 || r.Stderr != "opx: required rank input missing: SLURM_PROCID\n" {
		t.Errorf("missing SLURM_PROCID: exit %d %q", r.Code, r.Stderr)
	}
	// timing mode execs the harness directly, results into the stage
	g := newRankFixture(t)
	if r := g.rank("OPERATORX_MODE=timing"); r.Code != 0 {
		t.Fatalf("timing: %d %s", r.Code, r.Stderr)
	}
	if c := g.calls(); len(c) != 1 || c[0][0] != "python3" || c[0][len(c[0])-2] != g.stage+"/results" {
		t.Errorf("timing calls %q", c)
	}
}

// Finding 1: the rank's cache dir /tmp/operatorx-<job>-<rank> was accepted when it already
// existed. Another user pre-created it world-writable with a usercustomize.py; HOME pointed
// there and the harness's Python ran the planted code as root. Later, the rank refused
// such a directory, but the predictable name still let any local user make the next
// shard fail by making it first (issue 30). Now the cache is a fresh directory of a name
// no one can guess (operatorx-<job>-<rank>-<random>, made 0700), under $SLURM_TMPDIR when
// the site has one, else in the execution's stage (issue 47: never on the node's shared
// /tmp, where a rank killed before its own cleanup left it): a planted directory of the
// old name is neither used nor in the way. Finding 14: the directory was never removed;
// now the rank removes it when the harness ends, and finalize with the stage.
func TestRankCacheCannotBePlanted(t *testing.T) {
	name, _ := testenv.OtherUser(t)
	f := newRankFixture(t)
	f.tmp = filepath.Join(testenv.SharedDir(t), "tmp") // a shared /tmp
	os.Mkdir(f.tmp, 0o755)
	os.Chmod(f.tmp, 0o1777)
	planted := f.tmp + "/operatorx-9876-1"
	site := planted + "/.local/lib/python3.11/site-packages"
	testenv.AsOther(t, "mkdir -p "+site+" && chmod -R 777 "+planted+" && echo 'import os; os.system(\"touch /tmp/opx-pwned\")' > "+site+"/usercustomize.py")
	r := f.rank("OPERATORX_MODE=timing")
	if r.Code != 0 {
		t.Fatalf("with %s's directory of the old name planted: exit %d %q", name, r.Code, r.Stderr)
	}
	c := f.calls()
	if len(c) != 1 {
		t.Fatalf("harness calls %q", c)
	}
	home := f.home(t, c[0])
	if home == planted {
		t.Fatalf("the harness ran with the planted HOME %s", planted)
	}
	if _, err := os.Lstat(home); err == nil {
		t.Errorf("%s is left behind after the rank ended", home)
	}
	if _, err := os.Stat(site + "/usercustomize.py"); err != nil {
		t.Errorf("the other user's files were touched: %v", err)
	}
	// Slurm's per-job directory, when the site has one, is where the cache goes
	job := filepath.Join(f.dir, "job-tmp")
	os.MkdirAll(job, 0o700)
	if r := f.rank("OPERATORX_MODE=timing", "SLURM_TMPDIR="+job); r.Code != 0 {
		t.Fatalf("with SLURM_TMPDIR: exit %d %q", r.Code, r.Stderr)
	}
	if c := f.calls(); len(c) != 2 || !strings.Contains(c[1][len(c[1])-1], "HOME="+job+"/operatorx-9876-1-") {
		t.Errorf("with SLURM_TMPDIR, harness calls %q", c)
	}
}

// The harness's exit status is the rank's (it runs as a child now, not exec'd).
func TestRankPassesTheHarnessExitStatus(t *testing.T) {
	f := newRankFixture(t)
	os.WriteFile(filepath.Join(f.bin, "python3"), []byte("#!/bin/sh\nexit 7\n"), 0o755)
	if r := f.rank("OPERATORX_MODE=timing"); r.Code != 7 || r.Stderr != "" {
		t.Errorf("exit %d %q, want the harness's 7 and nothing said", r.Code, r.Stderr)
	}
	os.WriteFile(filepath.Join(f.bin, "python3"), []byte("#!/bin/sh\nkill -TERM $$\n"), 0o755)
	if r := f.rank("OPERATORX_MODE=timing"); r.Code != 143 {
		t.Errorf("harness killed by SIGTERM: rank exit %d %q, want 143", r.Code, r.Stderr)
	}
}
