package counters

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strings"
)

// ncuSizes and ncuTimes are every unit Nsight Compute writes, in the vocabulary's base
// units (bytes, nanoseconds): its older CSVs spell times nsecond/usecond/msecond, its
// newer ns/us/ms — 1000x apart if misread. Counts (%, cycles, sectors, instructions,
// warps) are as they are; a rate is its size over its time (byte/s, Gbyte/second).
var (
	ncuSizes = map[string]float64{"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
	ncuTimes = map[string]float64{"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
		"s": 1e9, "second": 1e9}
	ncuCounts = map[string]bool{"": true, "%": true, "cycle": true, "cycles": true, "sector": true, "sectors": true,
		"inst": true, "instructions": true, "warp": true, "warps": true, "thread": true, "threads": true, "block": true,
		"request": true, "requests": true}
	ncuFreqs = map[string]float64{"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
)

// ReadNCU reads one `ncu --csv` output: the details page (a row per kernel and metric:
// "ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"; 2022 and 2023+
// column sets) or the raw page (a row per kernel, a column per metric, a units row after
// the header). Kernels are named by their innermost NVTX range (execute runs ncu with
// --print-nvtx-rename kernel): opx<index>.
func ReadNCU(r io.Reader, res *Result) error {
	kernels, err := ncuKernels(r)
	if err != nil {
		return err
	}
	byCase := map[int][]kernel{}
	for _, k := range kernels {
		if k.index < 0 {
			res.Unranged++
			continue
		}
		byCase[k.index] = append(byCase[k.index], ncuKernel(k.metrics))
	}
	for i, ks := range byCase {
		res.Cases[i] = combine("ncu", ks)
	}
	return nil
}

// ncuKernelRows is one kernel's metrics in base units, and the op its range names.
type ncuKernelRows struct {
	index   int
	metrics map[string]float64
}

// ncuTable is the CSV being read: its header and, for the raw page, its units row.
type ncuTable struct {
	header []string
	col    map[string]int
	units  map[string]string
	raw    bool
}

func (t *ncuTable) field(rec []string, name string) string {
	if i, ok := t.col[name]; ok && i < len(rec) {
		return rec[i]
	}
	return ""
}

// ncuKernels reads the CSV's kernels in order.
func ncuKernels(r io.Reader) ([]*ncuKernelRows, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	var t *ncuTable
	kernels := map[string]*ncuKernelRows{}
	var order []*ncuKernelRows
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", line, err)
		}
		if len(rec) == 1 && strings.HasPrefix(strings.TrimSpace(rec[0]), "==") { // ==PROF==, ==WARNING==, ==ERROR==
			continue
		}
		if t == nil {
			if has(rec, "Kernel Name") && has(rec, "ID") {
				t = &ncuTable{header: rec, col: map[string]int{}, units: map[string]string{}, raw: !has(rec, "Metric Name")}
				for i, h := range rec {
					t.col[h] = i
				}
			}
			continue
		}
		// records are read by the header's names, whatever columns a version adds after
		// them (rule names, estimated speed-ups): a record with no kernel id is a message
		// or a rule's row, not a metric
		if t.field(rec, "ID") == "" && !t.raw {
			continue
		}
		if t.raw && t.field(rec, "ID") == "" { // the units row
			for i, u := range rec {
				t.units[t.header[i]] = u
			}
			continue
		}
		id := t.field(rec, "ID") + "\x00" + t.field(rec, "Process ID")
		k := kernels[id]
		if k == nil {
			k = &ncuKernelRows{index: rangeIndex(t.field(rec, "Kernel Name")), metrics: map[string]float64{}}
			kernels[id] = k
			order = append(order, k)
		}
		if err := t.add(k, rec); err != nil {
			return nil, err
		}
	}
	if t == nil {
		return nil, fmt.Errorf("no ncu CSV header (\"ID\", \"Kernel Name\", ...) in it")
	}
	return order, nil
}

// ncuUsed are the metrics opx takes from ncu (ncuKernel): a unit it does not know on one
// of them is an error naming it, never a value taken as it is; on any other metric (the
// details page's "Registers Per Thread" in register/thread, "# SMs" in SM) it is no
// concern of opx's and the metric is passed over.
var ncuUsed = map[string]bool{"gpu__time_duration.sum": true, "dram__bytes_read.sum": true, "dram__bytes_write.sum": true,
	"lts__t_sectors_lookup_hit.sum": true, "lts__t_sectors_lookup_miss.sum": true, "lts__t_sector_hit_rate.pct": true,
	"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": true, "sm__throughput.avg.pct_of_peak_sustained_elapsed": true}

// ncuAliases are other names ncu gives the metrics opx uses: the details page's (its
// default sections name metrics for people: "Duration" is gpu__time_duration.sum, "L2
// Hit Rate" lts__t_sector_hit_rate.pct, "Compute (SM) Throughput" — "SM [%]" before 2020 —
// sm__throughput.avg.pct_of_peak_sustained_elapsed), and the DRAM byte counters of GPUs
// whose memory ncu counts by operation (dram__bytes_op_read.sum on GDDR parts).
var ncuAliases = map[string]string{
	"Duration": "gpu__time_duration.sum", "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
	"Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
	"dram__bytes_op_read.sum": "dram__bytes_read.sum", "dram__bytes_op_write.sum": "dram__bytes_write.sum",
}

// ncuName is the name opx knows a metric by.
func ncuName(name string) string {
	if a, ok := ncuAliases[strings.TrimSpace(name)]; ok {
		return a
	}
	return name
}

// add puts a record's metrics into its kernel's, in base units (ncuUsed says what a unit
// it does not know means).
func (t *ncuTable) add(k *ncuKernelRows, rec []string) error {
	put := func(name, unit, value string) error {
		name = ncuName(name)
		v, ok := number(value)
		if !ok {
			return nil
		}
		s, err := scale(unit)
		if err != nil {
			if !ncuUsed[name] {
				return nil
			}
			return fmt.Errorf("metric %s: %w", name, err)
		}
		k.metrics[name] = v * s // a metric and its alias in one file are the same figure
		return nil
	}
	if !t.raw {
		if t.field(rec, "Metric Name") == "" {
			return nil // a rule's row: no metric in it
		}
		return put(t.field(rec, "Metric Name"), t.field(rec, "Metric Unit"), t.field(rec, "Metric Value"))
	}
	for i, h := range t.header {
		if strings.Contains(h, "__") && i < len(rec) {
			if err := put(h, t.units[h], rec[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func has(rec []string, name string) bool {
	for _, s := range rec {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// scale is the factor from ncu's unit to the base unit: bytes, nanoseconds, bytes per
// second for a rate, counts as they are.
func scale(unit string) (float64, error) {
	u := strings.ToLower(strings.TrimSpace(unit))
	if s, ok := ncuSizes[u]; ok {
		return s, nil
	}
	if s, ok := ncuTimes[u]; ok {
		return s, nil
	}
	if ncuCounts[u] {
		return 1, nil
	}
	if f, ok := ncuFreqs[u]; ok {
		return f, nil
	}
	if num, den, ok := strings.Cut(u, "/"); ok { // a rate: byte/s, Gbyte/second, cycle/nsecond, inst/cycle
		n, nok := ncuSizes[num]
		if ncuCounts[num] {
			n, nok = 1, true
		}
		if d, dok := ncuTimes[den]; nok && dok {
			return n * 1e9 / d, nil // per second
		}
		if nok && ncuCounts[den] {
			return n, nil // per count
		}
	}
	return 0, fmt.Errorf("unknown unit %q", unit)
}

// ncuKernel maps the seed's ncu metrics to the vocabulary.
func ncuKernel(m map[string]float64) kernel {
	get := func(name string) (float64, bool) { v, ok := m[name]; return v, ok }
	k := kernel{tensorPct: math.NaN(), busyPct: math.NaN()}
	k.timeNS, k.hasTime = get("gpu__time_duration.sum")
	k.read, k.hasRead = get("dram__bytes_read.sum")
	k.write, k.hasWrite = get("dram__bytes_write.sum")
	hit, okH := get("lts__t_sectors_lookup_hit.sum")
	miss, okM := get("lts__t_sectors_lookup_miss.sum")
	if okH && okM && hit+miss > 0 {
		k.l2Hit, k.l2Lookups, k.hasL2 = hit, hit+miss, true
	} else if v, ok := get("lts__t_sector_hit_rate.pct"); ok {
		k.l2HitPct, k.hasL2 = v, true
	}
	if v, ok := get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"); ok {
		k.tensorPct = v
	}
	if v, ok := get("sm__throughput.avg.pct_of_peak_sustained_elapsed"); ok {
		k.busyPct = v
	}
	return k
}
