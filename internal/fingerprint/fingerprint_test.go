package fingerprint

// nvidia-smi, amd-smi and enroot cannot run here (no GPU): recording fakes stand in for
// them. Each checks the exact arguments it is given, records them and the marker variable
// of the environment it received, and prints the real tool's output format (testdata/).

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

type fakes struct {
	dir, log string
}

func installFakes(t *testing.T, tools ...string) *fakes {
	t.Helper()
	f := &fakes{dir: t.TempDir()}
	f.log = filepath.Join(f.dir, "calls.log")
	scripts := map[string]string{
		"nvidia-smi": `[ "$*" = "-q -x" ] || { echo "nvidia-smi: unexpected arguments: $*" >&2; exit 2; }
cat "$OPX_FAKE_NVIDIA"`,
		"amd-smi": `case "$*" in
"static --json") cat "$OPX_FAKE_AMD_STATIC" ;;
"static --partition --json") cat "$OPX_FAKE_AMD_PARTITION" ;;
"metric --json") cat "$OPX_FAKE_AMD_METRIC" ;;
"version") cat testdata/amd-smi-version.txt 2>/dev/null || cat "$OPX_FAKE_AMD_VERSION" ;;
*) echo "amd-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac`,
		"enroot": `[ "$*" = "version" ] || exit 2
echo 4.1.2`,
	}
	for _, tool := range tools {
		body := "#!/bin/sh\necho \"" + tool + " $* mark=$OPX_FAKE_MARK\" >> \"" + f.log + "\"\n" + scripts[tool] + "\n"
		if err := os.WriteFile(filepath.Join(f.dir, tool), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", f.dir+":/usr/bin:/bin") // the tools are looked up on opx's own PATH
	return f
}

func (f *fakes) calls(t *testing.T) []string {
	b, _ := os.ReadFile(f.log)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func take(t *testing.T, phase string, env ...string) *Fingerprint {
	t.Helper()
	abs := func(p string) string { a, _ := filepath.Abs(filepath.Join("testdata", p)); return a }
	var e []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPX_FAKE_") && k != "OPX_FAKE_MARK" {
			v = abs(v)
		}
		e = append(e, k+"="+v)
	}
	e = append(e, "PATH="+os.Getenv("PATH"), "OPX_FAKE_AMD_VERSION="+abs("amd-smi-version.txt"))
	return Take(context.Background(), phase, Options{Env: e})
}

func TestNVIDIADriver535(t *testing.T) {
	fk := installFakes(t, "nvidia-smi", "enroot")
	f := take(t, "before", "OPX_FAKE_NVIDIA=nvidia-smi-h100-535.xml", "OPX_FAKE_MARK=7")
	if got := fk.calls(t); !slices.Equal(got, []string{"enroot version mark=7", "nvidia-smi -q -x mark=7"}) {
		t.Errorf("calls %q", got)
	}
	if f.Vendor != "nvidia" || f.Driver != "535.161.08" || f.Toolkit != "CUDA 12.2" || f.Enroot != "4.1.2" || len(f.GPUs) != 2 || len(f.Missing) != 0 {
		t.Fatalf("%+v", f)
	}
	g := f.GPUs[1]
	if g.Index != 1 || g.Model != "NVIDIA H100 80GB HBM3" || g.Serial != "1654923000001" || !strings.HasPrefix(g.UUID, "GPU-3f1c9a52-") ||
		g.PowerLimitW != 700 || g.PowerDrawW != 69.71 || g.MaxSMMHz != 1980 || g.SMClockMHz != 1980 || g.MemClockMHz != 2619 ||
		g.TemperatureC != 35 || g.ECC != "Enabled" || g.MIG != "Disabled" || len(g.Throttle) != 0 {
		t.Errorf("gpu 1: %+v", g)
	}
	// no counters on this driver: the reasons active in the snapshots decide
	capped := take(t, "after", "OPX_FAKE_NVIDIA=nvidia-smi-h100-535-powercap.xml")
	if th := Throttled(f, capped, 8); !slices.Equal(th.GPUs, []int{1}) || !slices.Equal(th.Reasons, []string{"sw_power_cap"}) {
		t.Errorf("throttled %+v", th)
	}
	if th := Throttled(f, capped, 1); len(th.GPUs) != 0 {
		t.Errorf("a 1-GPU shard used GPU 0 only: %+v", th)
	}
}

func TestNVIDIADriver570CountersAndDifferences(t *testing.T) {
	installFakes(t, "nvidia-smi")
	before := take(t, "before", "OPX_FAKE_NVIDIA=nvidia-smi-b200-570-before.xml")
	after := take(t, "after", "OPX_FAKE_NVIDIA=nvidia-smi-b200-570-after.xml")
	g := after.GPUs[1]
	if after.Driver != "570.86.15" || after.Toolkit != "CUDA 12.8" || g.Model != "NVIDIA B200" || g.PowerLimitW != 1000 || g.PowerDrawW != 141.5 ||
		g.ThrottleCounters["sw_power_cap"] != 91403239 || g.ThrottleCounters["hw_power_brake"] != 0 {
		t.Fatalf("%+v", g)
	}
	if !slices.Contains(after.Missing, "enroot: not found") {
		t.Errorf("enroot absent is said: %q", after.Missing)
	}
	// the power-cap counter of GPU 1 grew while the shard ran; GPU 0's did not
	if th := Throttled(before, after, 2); !slices.Equal(th.GPUs, []int{1}) || !slices.Equal(th.Reasons, []string{"sw_power_cap"}) {
		t.Errorf("throttled %+v", th)
	}
	if th := Throttled(before, before, 2); len(th.GPUs) != 0 {
		t.Errorf("counters that did not move: %+v", th)
	}
	capped := take(t, "before", "OPX_FAKE_NVIDIA=nvidia-smi-b200-570-600w.xml")
	if d := Differences(after.Summary(), capped.Summary()); !slices.Equal(d, []string{"power limit 1000 W → 600 W"}) {
		t.Errorf("differences %q", d)
	}
	installFakes(t, "nvidia-smi")
	h100 := take(t, "before", "OPX_FAKE_NVIDIA=nvidia-smi-h100-535.xml")
	d := Differences(h100.Summary(), after.Summary())
	if len(d) != 5 || d[0] != "GPU NVIDIA H100 80GB HBM3 → NVIDIA B200" || d[1] != "driver 535.161.08 → 570.86.15" || d[2] != "toolkit CUDA 12.2 → CUDA 12.8" {
		t.Errorf("H100 against B200: %q", d)
	}
}

func TestAMDSMI(t *testing.T) {
	fk := installFakes(t, "amd-smi")
	before := take(t, "before", "OPX_FAKE_AMD_STATIC=amd-smi-mi300x-static.json", "OPX_FAKE_AMD_METRIC=amd-smi-mi300x-metric-before.json", "OPX_FAKE_MARK=amd")
	if got := fk.calls(t); !slices.Equal(got, []string{"amd-smi static --json mark=amd", "amd-smi metric --json mark=amd", "amd-smi version mark=amd"}) {
		t.Errorf("calls %q", got)
	}
	if before.Vendor != "amd" || before.Driver != "6.8.5" || before.Toolkit != "ROCm 6.2.0" || len(before.GPUs) != 2 ||
		!slices.Equal(before.Missing, []string{"enroot: not found"}) { // an AMD node has no nvidia-smi to miss
		t.Fatalf("%+v", before)
	}
	g := before.GPUs[0]
	if g.Model != "AMD Instinct MI300X" || g.Serial != "0x6F1F0A2B3C4D5E00" || g.PowerLimitW != 750 || g.PowerDrawW != 141 || g.SMClockMHz != 2100 ||
		g.MaxSMMHz != 2100 || g.MemClockMHz != 1300 || g.TemperatureC != 44 || g.ECC != "Enabled" || g.MIG != "SPX" {
		t.Errorf("gpu 0: %+v", g)
	}
	after := take(t, "after", "OPX_FAKE_AMD_STATIC=amd-smi-mi300x-static.json", "OPX_FAKE_AMD_METRIC=amd-smi-mi300x-metric-after.json")
	if th := Throttled(before, after, 8); !slices.Equal(th.GPUs, []int{1}) || !slices.Equal(th.Reasons, []string{"ppt"}) {
		t.Errorf("throttled %+v", th)
	}
	// ROCm 6.4's form: the list under "gpu_data"
	mi355 := take(t, "before", "OPX_FAKE_AMD_STATIC=amd-smi-mi355x-static.json", "OPX_FAKE_AMD_METRIC=amd-smi-mi355x-metric.json")
	if len(mi355.GPUs) != 2 || mi355.GPUs[1].Model != "AMD Instinct MI355X" || mi355.GPUs[1].Index != 1 || mi355.GPUs[1].MIG != "SPX" {
		t.Errorf("gpu_data form: %+v", mi355)
	}
	// ROCm 7: no partition in the default static output; static --partition gives it
	r7 := take(t, "before", "OPX_FAKE_AMD_STATIC=amd-smi-mi355x-static-rocm7.json", "OPX_FAKE_AMD_METRIC=amd-smi-mi355x-metric.json",
		"OPX_FAKE_AMD_PARTITION=amd-smi-mi355x-static-partition.json")
	if len(r7.GPUs) != 2 || r7.GPUs[0].MIG != "SPX" || r7.GPUs[1].MIG != "SPX" || slices.ContainsFunc(r7.Missing, func(m string) bool { return strings.Contains(m, "amd-smi") }) {
		t.Errorf("ROCm 7 (partition apart): %+v", r7)
	}
	if got := fk.calls(t); !slices.Contains(got, "amd-smi static --partition --json mark=") {
		t.Errorf("ROCm 7: calls %q", got)
	}
}

// AMD's own published `amd-smi metric -p --json` (ROCm 6.1, from amdsmi's CHANGELOG; see
// testdata/README.md): one GPU's power section and nothing else. The socket power is read;
// what it does not report (clocks, temperatures, the other GPU) stays unknown (0), and
// "throttle_status": "UNTHROTTLED" with no accumulators is no slowdown.
func TestAMDMetricPowerAsAMDPublishesIt(t *testing.T) {
	installFakes(t, "amd-smi")
	f := take(t, "before", "OPX_FAKE_AMD_STATIC=amd-smi-mi300x-static.json", "OPX_FAKE_AMD_METRIC=amd-smi-metric-power-amdsmi-changelog.json")
	if len(f.GPUs) != 2 {
		t.Fatalf("%+v", f)
	}
	g0, g1 := f.GPUs[0], f.GPUs[1]
	if g0.PowerDrawW != 10 || g0.SMClockMHz != 0 || g0.MemClockMHz != 0 || g0.TemperatureC != 0 || g0.PowerLimitW != 750 {
		t.Errorf("gpu 0: %+v", g0)
	}
	if g1.PowerDrawW != 0 || g1.SMClockMHz != 0 {
		t.Errorf("gpu 1 has no metric in the sample, yet: %+v", g1)
	}
	if th := Throttled(f, f, 8); len(th.GPUs) != 0 || len(th.Reasons) != 0 {
		t.Errorf("UNTHROTTLED read as a slowdown: %+v", th)
	}
}

func TestToolsAbsent(t *testing.T) {
	installFakes(t)
	f := take(t, "before")
	if f.Vendor != "none" || len(f.GPUs) != 0 || !slices.Equal(f.Missing, []string{"enroot: not found", "nvidia-smi: not found", "amd-smi: not found"}) {
		t.Errorf("%+v", f)
	}
	if f.Node == "" {
		t.Error("the node's name is recorded even without GPU tools")
	}
	path := filepath.Join(t.TempDir(), "fp.json")
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(context.Background(), path)
	if err != nil || back.Node != f.Node || !slices.Equal(back.Missing, f.Missing) {
		t.Errorf("round trip: %v %+v", err, back)
	}
	if th := Throttled(nil, nil, 8); len(th.GPUs) != 0 {
		t.Error("no snapshot, no throttling")
	}
}

func TestPyxisVersionFromThePlugstack(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, "opt/pyxis/spank_pyxis.so")
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.WriteFile(lib, []byte("\x7fELF...\x00pyxis: version v0.24.0\x00..."), 0o644)
	os.MkdirAll(filepath.Join(root, "etc/slurm"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/slurm/slurm.conf"), []byte("ClusterName=x\nPlugStackConfig=/etc/slurm/site-plugstack.conf\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/slurm/site-plugstack.conf"), []byte("required /opt/pyxis/spank_pyxis.so runtime_path=/run/pyxis\n"), 0o644)
	if v := pyxisVersion(t.Context(), Options{Root: root, Env: []string{"SLURM_CONF=/etc/slurm/slurm.conf"}}); v != "0.24.0" {
		t.Errorf("pyxis version %q", v)
	}
	if v := pyxisVersion(t.Context(), Options{Root: root, Env: []string{}}); v != "" {
		t.Errorf("no plugstack.conf at the default place: %q", v)
	}
}

// A GPU's index is its place in nvidia-smi's list (PCI bus order, NVML's and
// CUDA_VISIBLE_DEVICES' order), never its minor_number: where the two differ (a
// workstation whose display GPU is /dev/nvidia1 but bus 0; some A100 nodes) the
// throttling of GPU 0 must be read from the first GPU listed (issue 32). The H100 snapshot
// here with its two minor numbers exchanged is such a machine.
func TestNVIDIAIndexIsListOrderNotMinorNumber(t *testing.T) {
	installFakes(t, "nvidia-smi", "enroot")
	b, err := os.ReadFile(filepath.Join("testdata", "nvidia-smi-h100-535.xml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "<minor_number>0</minor_number>", "<minor_number>X</minor_number>", 1)
	text = strings.Replace(text, "<minor_number>1</minor_number>", "<minor_number>0</minor_number>", 1)
	text = strings.Replace(text, "<minor_number>X</minor_number>", "<minor_number>1</minor_number>", 1)
	swapped := filepath.Join(t.TempDir(), "swapped.xml")
	os.WriteFile(swapped, []byte(text), 0o644)
	g := Take(t.Context(), "before", Options{Env: []string{"OPX_FAKE_NVIDIA=" + swapped, "PATH=" + os.Getenv("PATH")}})
	if len(g.GPUs) != 2 || g.GPUs[0].Index != 0 || g.GPUs[1].Index != 1 || g.GPUs[1].Serial != "1654923000001" {
		t.Errorf("GPUs %+v", g.GPUs)
	}
}

// amd-smi output with no GPU in it (null) is a finding, not a node of 0 GPUs with nothing
// missing; a reading too large for a float (1e400) is that reading not recorded, not an
// error in Go's words (issue 30).
func TestAMDNullAndOverflowingReadings(t *testing.T) {
	f := &Fingerprint{}
	if err := readAMD(f, []byte("null\n"), nil, ""); err == nil || !strings.Contains(err.Error(), "lists no GPU (it printed null)") {
		t.Errorf("null: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "amd-smi-mi300x-static.json"))
	if err != nil {
		t.Fatal(err)
	}
	big := regexp.MustCompile(`("max_power": \{"value": )[0-9.]+`).ReplaceAllString(string(b), "${1}1e400")
	if big == string(b) {
		big = strings.Replace(string(b), `"gpu": 1`, `"gpu": 1, "huge": 1e400`, 1)
	}
	f = &Fingerprint{}
	if err := readAMD(f, []byte(big), nil, ""); err != nil || len(f.GPUs) != 2 {
		t.Errorf("1e400: %v, %d GPUs", err, len(f.GPUs))
	}
}

// Real nvidia-smi output from another driver generation: `nvidia-smi -q -x` of two Tesla
// P100s on driver 375.66 (nvsmi_device_v8.dtd), as Apache Hadoop keeps it for its GPU
// discovery tests (testdata/README.md names the source). Every figure below is read off
// the file: the GPUs in nvidia-smi's order, their power limit and draw (power_readings),
// clocks, temperature and ECC; GPU idle is the one reason active (recorded as such), and
// idle is no slowdown.
func TestNVIDIADriver375FromHadoop(t *testing.T) {
	installFakes(t, "nvidia-smi", "enroot")
	f := take(t, "before", "OPX_FAKE_NVIDIA=nvidia-smi-p100-375-hadoop.xml")
	if f.Vendor != "nvidia" || f.Driver != "375.66" || len(f.GPUs) != 2 || len(f.Missing) != 0 {
		t.Fatalf("%+v", f)
	}
	g := f.GPUs[0]
	if g.Index != 0 || g.Model != "Tesla P100-PCIE-12GB" || g.Serial != "0320717030197" || g.UUID != "GPU-28604e81-21ec-cc48-6759-bf2648b22e16" ||
		g.PowerLimitW != 250 || g.PowerDrawW != 24.84 || g.MaxSMMHz != 1328 || g.SMClockMHz != 405 || g.MemClockMHz != 715 ||
		g.TemperatureC != 31 || g.ECC != "Enabled" || !slices.Equal(g.Throttle, []string{"gpu_idle"}) {
		t.Errorf("gpu 0: %+v", g)
	}
	g = f.GPUs[1]
	if g.Index != 1 || g.Serial != "0320717031755" || g.PowerDrawW != 25.54 || g.TemperatureC != 34 {
		t.Errorf("gpu 1: %+v", g)
	}
	if th := Throttled(f, f, 2); len(th.GPUs) != 0 {
		t.Errorf("an idle GPU read as throttled: %+v", th)
	}
}

// A fingerprint tells machines of one CPU model apart by their flags and memory: read off
// this machine's own /proc/cpuinfo and /proc/meminfo (real output), the flags are one
// digest whatever their order, another when one flag differs, and the memory is the
// kernel's total as sysinfo(2) gives it.
func TestCPUFlagsAndMemory(t *testing.T) {
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo on this machine")
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo on this machine")
	}
	take := func(cpu string) *Fingerprint {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "proc"), 0o755)
		os.WriteFile(filepath.Join(root, "proc", "cpuinfo"), []byte(cpu), 0o644)
		os.WriteFile(filepath.Join(root, "proc", "meminfo"), meminfo, 0o644)
		return Take(t.Context(), "before", Options{Root: root, Env: []string{"PATH=" + t.TempDir()}})
	}
	f := take(string(cpuinfo))
	if !strings.HasPrefix(f.CPUFlags, "sha256:") || len(f.CPUFlags) != len("sha256:")+12 {
		t.Fatalf("cpu flags %q", f.CPUFlags)
	}
	var flagsLine string
	for line := range strings.Lines(string(cpuinfo)) {
		if k, _, ok := strings.Cut(line, ":"); ok && (strings.TrimSpace(k) == "flags" || strings.TrimSpace(k) == "Features") {
			flagsLine = line
			break
		}
	}
	if flagsLine == "" {
		t.Skip("this machine's cpuinfo lists no flags")
	}
	k, v, _ := strings.Cut(flagsLine, ":")
	fields := strings.Fields(v)
	slices.Reverse(fields)
	reordered := strings.Replace(string(cpuinfo), flagsLine, k+": "+strings.Join(fields, " ")+"\n", -1)
	if g := take(reordered).CPUFlags; g != f.CPUFlags {
		t.Errorf("the same flags in another order: %s, not %s", g, f.CPUFlags)
	}
	fewer := strings.Replace(string(cpuinfo), flagsLine, k+": "+strings.Join(fields[1:], " ")+"\n", -1)
	if g := take(fewer).CPUFlags; g == f.CPUFlags {
		t.Errorf("one flag fewer, the same digest %s", g)
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if want := int(uint64(si.Totalram) * uint64(si.Unit) / (1 << 20)); f.MemMiB < want-1 || f.MemMiB > want+1 {
		t.Errorf("memory %d MiB, sysinfo says %d", f.MemMiB, want)
	}
}
