package fingerprint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two runs measuring on one machine see each other through the registry's locks: a claim
// is seen while it is held and not after; a file nobody holds (its run died) is no run; a
// run's own claim is not another's; and a registry that is a link is not used.
func TestOthersMeasuring(t *testing.T) {
	env := []string{"TMPDIR=" + t.TempDir()}
	if got := OthersMeasuring(env, ""); len(got) != 0 {
		t.Fatalf("an empty registry lists %q", got)
	}
	a, err := StartMeasuring(env, "run /x/a, shard s-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartMeasuring(env, "run /x/b\nshard s-2")
	if err != nil {
		t.Fatal(err)
	}
	got := OthersMeasuring(env, a.Name())
	if len(got) != 1 || !strings.HasSuffix(got[0], ": run /x/b shard s-2") || !strings.HasPrefix(got[0], "pid ") {
		t.Errorf("a sees %q, want b", got)
	}
	dir := filepath.Join(env[0][len("TMPDIR="):], "opx-measuring")
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("registry %v %v: want a sticky directory every user may write", fi.Mode(), err)
	}
	os.WriteFile(filepath.Join(dir, "dead-1-1"), []byte("pid 1: a run that died\n"), 0o644)
	b.Close()
	if got := OthersMeasuring(env, a.Name()); len(got) != 0 {
		t.Errorf("after b closed and beside a dead claim, a sees %q", got)
	}
	if got := OthersMeasuring(env, ""); len(got) != 1 {
		t.Errorf("a fingerprint of no run sees %q, want a", got)
	}
	a.Close()
	if got := OthersMeasuring(env, ""); len(got) != 0 {
		t.Errorf("after every claim closed: %q", got)
	}

	linked := t.TempDir()
	os.Symlink(t.TempDir(), filepath.Join(linked, "opx-measuring"))
	if _, err := StartMeasuring([]string{"TMPDIR=" + linked}, "x"); err == nil {
		t.Error("a registry that is a link was used")
	}
	before := &Fingerprint{OtherRuns: []string{"pid 7: run r"}}
	after := &Fingerprint{OtherRuns: []string{"pid 7: run r", "pid 9: run q"}}
	if s := Contention(before, after, 1); s != "another opx run measured on this machine at the same time (pid 7: run r; pid 9: run q)" {
		t.Errorf("Contention: %q", s)
	}
	if s := Contention(nil, &Fingerprint{}, 1); s != "" {
		t.Errorf("Contention of none: %q", s)
	}
}

// The machine's CPU state is read from /proc and /sys: cores, mean clock, governor, load.
func TestHostFacts(t *testing.T) {
	root := t.TempDir()
	for path, text := range map[string]string{
		"/proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\ncpu MHz\t\t: 2400.000\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\ncpu MHz\t\t: 3700.000\n",
		"/proc/loadavg": "2.50 1.25 0.75 3/512 4242\n",
		"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755)
		os.WriteFile(filepath.Join(root, path), []byte(text), 0o644)
	}
	f := Take(t.Context(), "before", Options{Root: root, Env: []string{"PATH=" + t.TempDir(), "TMPDIR=" + t.TempDir()}})
	if f.CPU != "AMD EPYC 9654 96-Core Processor" || f.Cores != 2 || f.CPUMHz != 3050 || f.Governor != "powersave" ||
		len(f.Load) != 3 || f.Load[0] != 2.5 || f.Load[2] != 0.75 {
		t.Errorf("host facts: cpu %q cores %d MHz %v governor %q load %v", f.CPU, f.Cores, f.CPUMHz, f.Governor, f.Load)
	}
	// a load of 2.5 on 2 cores is a busy machine as a shard starts; after a shard of 1
	// rank, 1.5 of others' is not; OPX_BUSY_LOAD moves the line either way
	if f.BusyLoad != 2 || Contention(f, nil, 1) != "the machine's load was 2.5 on 2 cores as it started" {
		t.Errorf("busy before: limit %v, %q", f.BusyLoad, Contention(f, nil, 1))
	}
	if s := Contention(nil, f, 1); s != "" {
		t.Errorf("a shard's own rank is contention: %q", s)
	}
	if s := Contention(nil, f, 0); s != "the machine's load was 2.5 on 2 cores as it ended" {
		t.Errorf("busy after: %q", s)
	}
	quiet := Take(t.Context(), "before", Options{Root: root, Env: []string{"PATH=" + t.TempDir(), "TMPDIR=" + t.TempDir(), BusyLoadEnv + "=4"}})
	busy := Take(t.Context(), "before", Options{Root: root, Env: []string{"PATH=" + t.TempDir(), "TMPDIR=" + t.TempDir(), BusyLoadEnv + "=0.5"}})
	if quiet.BusyLoad != 4 || Contention(quiet, nil, 0) != "" || busy.BusyLoad != 0.5 || Contention(busy, nil, 0) == "" {
		t.Errorf("OPX_BUSY_LOAD: %v %q, %v %q", quiet.BusyLoad, Contention(quiet, nil, 0), busy.BusyLoad, Contention(busy, nil, 0))
	}
	old := &Fingerprint{Cores: 2, Load: []float64{3, 1, 1}} // recorded before the limit was
	if s := Contention(old, nil, 0); s != "the machine's load was 3.0 on 2 cores as it started" {
		t.Errorf("an older fingerprint: %q", s)
	}
}
