package counters

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strings"
)

// ncuScale converts a value in ncu's unit to the vocabulary's (bytes, nanoseconds, %).
var ncuScale = map[string]float64{
	"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
	"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
	"%": 1, "sector": 1, "": 1,
}

// ReadNCU reads one `ncu --csv` output: the details page (a row per kernel and metric:
// "ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"; 2022 and 2023+
// column sets) or the raw page (a row per kernel, a column per metric, a units row after
// the header). Kernels are named by their innermost NVTX range (execute runs ncu with
// --print-nvtx-rename kernel): opx<index>.
func ReadNCU(r io.Reader, res *Result) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	var header []string
	col := map[string]int{}
	type acc struct {
		index   int
		metrics map[string]float64
	}
	kernels := map[string]*acc{}
	var order []string
	units := map[string]string{} // raw page: metric → unit
	raw := false
	line := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return fmt.Errorf("record %d: %v", line, err)
		}
		if len(rec) == 1 && strings.HasPrefix(strings.TrimSpace(rec[0]), "==") { // ==PROF==, ==WARNING==, ==ERROR==
			continue
		}
		if header == nil {
			if has(rec, "Kernel Name") && has(rec, "ID") {
				header = rec
				for i, h := range rec {
					col[h] = i
				}
				raw = !has(rec, "Metric Name")
			}
			continue
		}
		if len(rec) != len(header) {
			continue // a message among the records
		}
		if raw && rec[col["ID"]] == "" { // the units row
			for i, u := range rec {
				units[header[i]] = u
			}
			continue
		}
		field := func(name string) string {
			if i, ok := col[name]; ok {
				return rec[i]
			}
			return ""
		}
		id := field("ID") + "\x00" + field("Process ID")
		k := kernels[id]
		if k == nil {
			k = &acc{index: rangeIndex(field("Kernel Name")), metrics: map[string]float64{}}
			kernels[id] = k
			order = append(order, id)
		}
		if raw {
			for i, h := range header {
				if strings.Contains(h, "__") {
					if v, ok := number(rec[i]); ok {
						k.metrics[h] = v * scale(units[h])
					}
				}
			}
			continue
		}
		if v, ok := number(field("Metric Value")); ok {
			k.metrics[field("Metric Name")] = v * scale(field("Metric Unit"))
		}
	}
	if header == nil {
		return fmt.Errorf("no ncu CSV header (\"ID\", \"Kernel Name\", ...) in it")
	}
	byCase := map[int][]kernel{}
	for _, id := range order {
		k := kernels[id]
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

func has(rec []string, name string) bool {
	for _, s := range rec {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

func scale(unit string) float64 {
	if s, ok := ncuScale[strings.ToLower(strings.TrimSpace(unit))]; ok {
		return s
	}
	return 1
}

// ncuKernel maps the seed's ncu metrics to the vocabulary.
func ncuKernel(m map[string]float64) kernel {
	get := func(name string) (float64, bool) { v, ok := m[name]; return v, ok }
	k := kernel{tensorPct: math.NaN(), busyPct: math.NaN()}
	k.timeNS, _ = get("gpu__time_duration.sum")
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
