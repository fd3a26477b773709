// Package fingerprint is what a shard records of its node before and after its benchmark (CPU, load,
// GPUs, driver, clocks, throttling), and which other opx runs measured beside it.
//
// It is what a shard records of the node it ran on, before and after its
// benchmark (opx fingerprint, one step on the allocation): the node, its CPU and kernel,
// enroot and pyxis versions, and each GPU's model, serial and UUID, driver, CUDA or ROCm
// version, clocks, power limit, ECC and MIG (partition) state, temperature and throttle
// reasons — read from `nvidia-smi -q -x` on NVIDIA nodes and `amd-smi static|metric
// --json` on AMD ones. A tool that is absent or fails is named in Missing; the shard runs
// regardless. Throttled compares a shard's two snapshots: which GPUs were held below their
// clocks by power or heat while it ran.
package fingerprint

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/proc"
)

// Fingerprint is one snapshot of a node.
type Fingerprint struct {
	Phase   string    `json:"phase"` // before | after
	TakenAt time.Time `json:"taken_at"`
	Node    string    `json:"node"`
	CPU     string    `json:"cpu_model,omitempty"`
	// Cores is the CPUs the kernel lists, CPUMHz their mean clock now, Governor cpu0's
	// cpufreq governor ("" where the machine has no cpufreq, as most VMs), Load the
	// 1-, 5- and 15-minute load averages: what tells a busy or slowed machine's CPU numbers
	// from its quiet ones.
	Cores  int     `json:"cpu_cores,omitempty"`
	CPUMHz float64 `json:"cpu_mhz,omitempty"`
	// CPUFlags is the CPU's feature flags, as one digest ("sha256:" and 12 hex digits of
	// the sorted set): two machines of one model name whose flags differ (microcode,
	// a hypervisor that hides AVX-512) tell apart. MemMiB is the memory the kernel has.
	CPUFlags string    `json:"cpu_flags,omitempty"`
	MemMiB   int       `json:"mem_total_mib,omitempty"`
	Governor string    `json:"cpu_governor,omitempty"`
	Load     []float64 `json:"load_average,omitempty"`
	// BusyLoad is the 1-minute load above which the machine is busy (Contention): its
	// cores, or $OPX_BUSY_LOAD where the operator set one when the snapshot was taken.
	BusyLoad float64 `json:"busy_load,omitempty"`
	// OtherRuns is each other opx run measuring on this machine when the snapshot was
	// taken (OthersMeasuring).
	OtherRuns []string `json:"other_opx_runs,omitempty"`
	Kernel    string   `json:"kernel,omitempty"`
	Enroot    string   `json:"enroot,omitempty"`
	Pyxis     string   `json:"pyxis,omitempty"`
	Vendor    string   `json:"vendor"` // nvidia, amd, or none
	Driver    string   `json:"driver,omitempty"`
	Toolkit   string   `json:"toolkit,omitempty"` // "CUDA 12.4", "ROCm 6.2.0"
	GPUs      []GPU    `json:"gpus"`
	// Missing names what could not be read, and why: "nvidia-smi: not found".
	Missing []string `json:"missing,omitempty"`
}

// GPU is one device's state. A figure the tool did not give is 0 (its text "N/A").
type GPU struct {
	Index        int     `json:"index"`
	Model        string  `json:"model"`
	Serial       string  `json:"serial,omitempty"`
	UUID         string  `json:"uuid,omitempty"`
	SMClockMHz   float64 `json:"sm_clock_mhz,omitempty"`
	MemClockMHz  float64 `json:"mem_clock_mhz,omitempty"`
	MaxSMMHz     float64 `json:"max_sm_clock_mhz,omitempty"`
	PowerLimitW  float64 `json:"power_limit_w,omitempty"`
	PowerDrawW   float64 `json:"power_draw_w,omitempty"`
	TemperatureC float64 `json:"temperature_c,omitempty"`
	ECC          string  `json:"ecc,omitempty"` // Enabled, Disabled
	MIG          string  `json:"mig,omitempty"` // NVIDIA MIG mode, AMD compute partition
	// Throttle is the reasons active when the snapshot was taken (power cap, thermal, …),
	// ThrottleCounters the time or count each has held the GPU back since boot, by reason.
	Throttle         []string           `json:"throttle,omitempty"`
	ThrottleCounters map[string]float64 `json:"throttle_counters,omitempty"`
}

// Options say where the tools are: Env is their environment (nil: inherited), Root
// prefixes the files read (/proc, the plugstack), for tests.
type Options struct {
	Env  []string
	Root string
	Now  func() time.Time
}

// Take reads the node now.
func Take(ctx context.Context, phase string, o Options) *Fingerprint {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	f := &Fingerprint{Phase: phase, TakenAt: now().UTC(), Vendor: "none", GPUs: []GPU{}}
	f.Node, _ = os.Hostname()
	f.CPU, f.Cores, f.CPUMHz, f.CPUFlags = cpuInfo(filepath.Join(o.Root, "/proc/cpuinfo"))
	f.MemMiB = memTotal(filepath.Join(o.Root, "/proc/meminfo"))
	if b, err := os.ReadFile(filepath.Join(o.Root, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")); err == nil {
		f.Governor = strings.TrimSpace(string(b))
	}
	f.Load = loadAverage(o.Root)
	f.BusyLoad = BusyLoad(o.Env, f.Cores)
	f.OtherRuns = OthersMeasuring(o.Env, envOf(o.Env, SelfEnv))
	if b, err := os.ReadFile(filepath.Join(o.Root, "/proc/sys/kernel/osrelease")); err == nil {
		f.Kernel = strings.TrimSpace(string(b))
	}
	run := func(argv ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		out, err := proc.Output(ctx, proc.Cmd{Argv: argv, Env: o.Env, Stderr: &stderr})
		if err != nil {
			if errorsIsNotFound(err) {
				return "", fmt.Errorf("%s: not found", argv[0])
			}
			return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		return out, nil
	}
	if out, err := run("enroot", "version"); err == nil {
		f.Enroot = strings.TrimSpace(out)
	} else {
		f.Missing = append(f.Missing, err.Error())
	}
	f.Pyxis = pyxisVersion(ctx, o)
	nv, nvErr := run("nvidia-smi", "-q", "-x")
	if nvErr == nil {
		if err := readNVIDIA(f, []byte(nv)); err != nil {
			f.Missing = append(f.Missing, "nvidia-smi -q -x: "+err.Error())
		}
		return f
	}
	static, amdErr := run("amd-smi", "static", "--json")
	if amdErr != nil {
		f.Missing = append(f.Missing, nvErr.Error(), amdErr.Error())
		return f
	}
	metric, err := run("amd-smi", "metric", "--json")
	if err != nil {
		f.Missing = append(f.Missing, err.Error())
	}
	version, err := run("amd-smi", "version")
	if err != nil {
		f.Missing = append(f.Missing, err.Error())
	}
	if err := readAMD(f, []byte(static), []byte(metric), version); err != nil {
		f.Missing = append(f.Missing, "amd-smi: "+err.Error())
	}
	// amd-smi of ROCm 7 leaves the partition out of the default static output (reading it
	// may wake the GPU); static --partition still gives it
	if len(f.GPUs) > 0 && !slices.ContainsFunc(f.GPUs, func(g GPU) bool { return g.MIG != "" }) {
		part, err := run("amd-smi", "static", "--partition", "--json")
		if err != nil {
			f.Missing = append(f.Missing, err.Error())
		} else if err := readAMDPartition(f, []byte(part)); err != nil {
			f.Missing = append(f.Missing, "amd-smi static --partition --json: "+err.Error())
		}
	}
	return f
}

func errorsIsNotFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound)
}

// cpuInfo is /proc/cpuinfo's first "model name" (x86) or "Model" line, how many
// processors it lists, and their mean "cpu MHz" (0 where it gives none).
func cpuInfo(path string) (model string, cores int, mhz float64, flags string) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var sum float64
	n := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); k {
		case "model name", "Model":
			if model == "" {
				model = v
			}
		case "processor":
			cores++
		case "flags", "Features": // x86, arm64: the first CPU's (they are the same set)
			if flags == "" {
				set := strings.Fields(v)
				slices.Sort(set)
				h := sha256.Sum256([]byte(strings.Join(slices.Compact(set), " ")))
				flags = "sha256:" + hex.EncodeToString(h[:6])
			}
		case "cpu MHz":
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				sum += x
				n++
			}
		}
	}
	if n > 0 {
		mhz = math.Round(sum / float64(n))
	}
	return model, cores, mhz, flags
}

// memTotal is /proc/meminfo's MemTotal in MiB (0 when it cannot be read).
func memTotal(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v) // "263890084 kB"
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.Atoi(f[0]); err == nil {
					return kb / 1024
				}
			}
		}
	}
	return 0
}

var pyxisRE = regexp.MustCompile(`pyxis: version v([0-9][0-9A-Za-z.+-]*)`)

// pyxisVersion finds pyxis in the SPANK plugstack (PlugStackConfig of the slurm.conf
// SLURM_CONF names, else /etc/slurm/plugstack.conf and its plugstack.conf.d) and reads
// the version pyxis logs at load ("pyxis: version v0.24.0") out of its library.
func pyxisVersion(ctx context.Context, o Options) string {
	conf := ""
	if c := envOf(o.Env, "SLURM_CONF"); c != "" {
		if b, err := os.ReadFile(filepath.Join(o.Root, c)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.EqualFold(k, "PlugStackConfig") {
					conf = strings.TrimSpace(v)
				}
			}
		}
	}
	confs := []string{conf}
	if conf == "" {
		confs = []string{"/etc/slurm/plugstack.conf"}
		more, _ := filepath.Glob(filepath.Join(o.Root, "/etc/slurm/plugstack.conf.d/*.conf"))
		for _, m := range more {
			confs = append(confs, strings.TrimPrefix(m, o.Root))
		}
	}
	for _, c := range confs {
		b, err := os.ReadFile(filepath.Join(o.Root, c))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || !strings.Contains(fields[1], "pyxis") {
				continue
			}
			lib, err := files.ReadRegular(ctx, filepath.Join(o.Root, fields[1]), 64<<20)
			if err != nil {
				continue
			}
			if m := pyxisRE.FindSubmatch(lib); m != nil {
				return string(m[1])
			}
		}
	}
	return ""
}

func envOf(env []string, k string) string {
	if env == nil {
		return os.Getenv(k)
	}
	for i := len(env) - 1; i >= 0; i-- {
		if name, v, ok := strings.Cut(env[i], "="); ok && name == k {
			return v
		}
	}
	return ""
}

// loadAverage is the machine's 1-, 5- and 15-minute load averages (/proc/loadavg under
// root; none when it cannot be read).
func loadAverage(root string) []float64 {
	b, err := os.ReadFile(filepath.Join(root, "/proc/loadavg"))
	if err != nil {
		return nil
	}
	var out []float64
	fields := strings.Fields(string(b))
	for _, field := range fields[:min(3, len(fields))] {
		if x, err := strconv.ParseFloat(field, 64); err == nil {
			out = append(out, x)
		}
	}
	return out
}

// Write writes the snapshot to path, atomically.
func (f *Fingerprint) Write(path string) error { return files.WriteIndented(path, f) }

// Read reads a snapshot.
func Read(ctx context.Context, path string) (*Fingerprint, error) {
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if err != nil {
		return nil, err
	}
	var f Fingerprint
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: not a fingerprint: %w", path, err)
	}
	return &f, nil
}
