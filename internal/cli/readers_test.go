package cli

// Findings 12 and 14 of the hardening review: every reader of outside JSON (summarize,
// report, compare) opens only regular files, bounded in size, and parses with one grammar,
// Python's.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/testenv"
)

// runWithin runs opx in-process and fails the test if it has not returned after limit:
// a guard against a hang (a FIFO opened for reading blocks forever), not a timing check.
func runWithin(t *testing.T, limit time.Duration, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- runOpx(t, args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("opx %s still running after %s", strings.Join(args, " "), limit)
	}
	return result{}
}

// Finding 12: a FIFO in a results tree blocked summarize, report and compare forever; a
// results symlink to /dev/zero grew memory without bound; a 1 GB results file took report
// 139 s and 6.7 GB. Now each is one line naming the file, at once.
func TestReadersRefuseFIFOsDevicesAndHugeFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
		want  string
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "r.json: not a regular file"},
		{"symlink to /dev/zero", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}, "r.json: not a regular file"},
		{"1 GB file", func(t *testing.T, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(1 << 30) // sparse: costs no disk
			f.Close()
		}, "r.json: too large (1073741824 bytes; at most 268435456)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, run := shardTree(t, t.TempDir())
			os.Remove(resultsFile(run))
			tc.plant(t, resultsFile(run))
			for _, args := range [][]string{
				{"summarize", "--manifest", filepath.Join(run, "operatorx-manifest.json"), "--artifacts", run, "--out", filepath.Join(t.TempDir(), "s.json")},
				{"report", run, "--out", filepath.Join(t.TempDir(), "r.html")},
				{"compare", run, run, "--allow-same"},
			} {
				r := runWithin(t, 20*time.Second, args...)
				if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("%s: exit %d %q, want one line with %q", args[0], r.code, r.stderr, tc.want)
				}
			}
		})
	}
}

// Finding 14: readers disagreed on JSON. -Infinity (which Python writes) was rejected
// everywhere; 01, 1. and invalid UTF-8 (which Python rejects) passed summarize but failed
// report and compare. Now all three read with Python's grammar and agree.
func TestReadersShareOneGrammar(t *testing.T) {
	for _, tc := range []struct {
		name, metric string
		ok           bool
	}{
		{"-Infinity", `-Infinity`, true},
		{"NaN", `NaN`, true},
		{"leading zero", `01`, false},
		{"bare point", `1.`, false},
		{"invalid UTF-8", "1, \"note\": \"\xff\"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, run := shardTree(t, t.TempDir())
			b, _ := os.ReadFile(resultsFile(run))
			os.WriteFile(resultsFile(run), []byte(strings.Replace(string(b), `"gflops": `, `"extra": `+tc.metric+`, "gflops": `, 1)), 0o644)
			var codes []int
			for _, args := range [][]string{
				{"summarize", "--manifest", filepath.Join(run, "operatorx-manifest.json"), "--artifacts", run, "--out", filepath.Join(t.TempDir(), "s.json")},
				{"report", run, "--out", filepath.Join(t.TempDir(), "r.html")},
				{"compare", run, run, "--allow-same"},
			} {
				r := runOpx(t, args...)
				codes = append(codes, r.code)
				if tc.ok && r.code != 0 {
					t.Errorf("%s refused what Python reads: exit %d %q", args[0], r.code, r.stderr)
				}
				if !tc.ok && (r.code != 1 || !strings.Contains(r.stderr, "r.json")) {
					t.Errorf("%s accepted what Python refuses: exit %d %q", args[0], r.code, r.stderr)
				}
			}
			if codes[0] != codes[1] || codes[1] != codes[2] {
				t.Errorf("summarize, report and compare disagree: exit codes %v", codes)
			}
		})
	}
}

// Finding 14: a base latency of 1e-320 made `compare --json` fail on -Inf. A change that
// is not a finite number is not a comparison: the metric is left out, and the JSON is
// written.
func TestCompareTinyBase(t *testing.T) {
	base := craftedRun(t, "100", map[int][3]float64{1: {1e-320, 1e-320, 1e-320}, 2: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {100, 98, 102}, 2: {100, 98, 102}})
	b, _ := os.ReadFile(resultsFile(base)) // 1e3/1e-320 GFLOP/s printed as +Inf: not JSON
	os.WriteFile(resultsFile(base), []byte(strings.ReplaceAll(string(b), "+Inf", "1")), 0o644)
	js := filepath.Join(t.TempDir(), "c.json")
	r := runOpx(t, "compare", base, nw, "--json", js)
	if r.code != 0 {
		t.Fatalf("compare: exit %d %q", r.code, r.stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil || strings.Contains(string(b), "Inf") || strings.Contains(string(b), "NaN") {
		t.Errorf("compare.json: %v %s", err, b)
	}
}

// Finding 14: escape sequences in testlist names and arg keys reached the terminal raw.
// Errors, the compare table and the summarize table now show them escaped.
func TestEscapeSequencesAreShownEscaped(t *testing.T) {
	r := runOpx(t, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "\x1b[2Jgone", "--world-sizes", "1",
		"--out", filepath.Join(t.TempDir(), "m.json"))
	if r.code == 0 || strings.ContainsRune(r.stderr, 0x1b) || !strings.Contains(r.stderr, `\x1b[2Jgone`) {
		t.Errorf("plan: exit %d %q", r.code, r.stderr)
	}
	base := craftedRun(t, "100", map[int][3]float64{1: {100, 98, 102}})
	nw := craftedRun(t, "101", map[int][3]float64{1: {200, 198, 202}})
	for _, run := range []string{base, nw} {
		for _, p := range []string{resultsFile(run), filepath.Join(run, "operatorx-manifest.json"), filepath.Join(run, "shards", "s1", "execution.json")} {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.ReplaceAll(strings.ReplaceAll(string(b), `"n": 64`, `"\u001b[8mn": 64`), `"id": "s1"`, `"id": "s1\u001b[2K"`)), 0o644)
		}
	}
	r = runOpx(t, "compare", base, nw)
	// in Markdown the escape's backslash and bracket are themselves escaped: it shows \x1b[8m
	if strings.ContainsRune(r.stdout+r.stderr, 0x1b) || !strings.Contains(r.stdout, `\\x1b\[8mn=64`) {
		t.Errorf("compare: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runOpx(t, "summarize", "--manifest", filepath.Join(base, "operatorx-manifest.json"), "--artifacts", base, "--out", filepath.Join(t.TempDir(), "s.json"))
	if strings.ContainsRune(r.stdout+r.stderr, 0x1b) || !strings.Contains(r.stdout, `| s1\x1b[2K |`) {
		t.Errorf("summarize: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// Finding 4: another user could pre-create .operatorx-<uid> in a shared storage root and
// block every execution, and the refusal named no path. It now names the directory, its
// owner and what to do, before anything is allocated.
func TestStageBaseOfAnotherUser(t *testing.T) {
	_, uid := testenv.OtherUser(t)
	dir := t.TempDir()
	root := testenv.SharedDir(t)
	os.Chmod(root, os.ModeSticky|0o777)
	base := filepath.Join(root, fmt.Sprintf(".operatorx-%d", os.Getuid()))
	testenv.AsOther(t, "mkdir -m 700 "+base)
	cfg := stagePlatform(t, dir, root)
	m, id := localManifest(t, dir, cfg)
	r := runOpx(t, executeArgs(m, id, filepath.Join(dir, "out"), "--platform-config", cfg)...)
	want := fmt.Sprintf("opx: unsafe shared OperatorX stage directory %s: belongs to another user (owner uid %d, mode 0700); remove it or ask its owner to\n", base, uid)
	if r.code != 1 || r.stderr != want {
		t.Errorf("exit %d %q\nwant %q", r.code, r.stderr, want)
	}
	// a dry run says the same, touching nothing
	r = runOpx(t, executeArgs(m, id, filepath.Join(dir, "out2"), "--platform-config", cfg, "--dry-run")...)
	if r.code != 1 || r.stderr != want {
		t.Errorf("dry run: exit %d %q", r.code, r.stderr)
	}
}

// Issue 17, item 4: a stage root holding ':' or ',' (pyxis rejects such a mount at step
// launch, after the allocation and the import) is refused by execute's dry run and by
// doctor too, naming the path.
func TestPyxisUnmountableStageRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "x,y")
	cfg, m := pyxisLab(t, dir, root)
	want := root + "/.operatorx-" + fmt.Sprint(os.Getuid()) + " holds ':' or ',', which pyxis cannot mount"
	r := runOpx(t, executeArgs(m, "lab-0000000000000000", filepath.Join(dir, "out"), "--platform-config", cfg, "--dry-run")...)
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("dry run: exit %d %q", r.code, r.stderr)
	}
	r = runOpx(t, "doctor", "--runner", "cluster:lab-pyxis", "--platform-config", cfg)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("doctor: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
