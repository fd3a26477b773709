package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/safe"
)

// amdList is amd-smi's --json: a list of per-GPU objects, or (ROCm 6.4 and later) an
// object holding that list as "gpu_data".
// Numbers are kept as text (json.Number) until read: a reading too large for a float
// (1e400) is a reading not recorded, not an error in Go's words about the whole output.
// Output that lists no GPU (amd-smi printing null) is an error: a node with no GPU is no
// fingerprint.
func amdList(data []byte) ([]map[string]any, error) {
	data = jsonStart(data)
	decode := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		return d.Decode(v)
	}
	var list []map[string]any
	err := decode(&list)
	if err != nil {
		var wrapped struct {
			GPUData []map[string]any `json:"gpu_data"`
		}
		if werr := decode(&wrapped); werr != nil {
			return nil, fmt.Errorf("not amd-smi's JSON (%w)", werr)
		}
		list = wrapped.GPUData
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("it lists no GPU (it printed %s)", safe.OneLine(string(bytes.TrimSpace(data[:min(len(data), 40)]))))
	}
	return list, nil
}

// jsonStart skips what amd-smi may print before its JSON (a WARNING line).
func jsonStart(data []byte) []byte {
	for i, c := range data {
		if c == '[' || c == '{' {
			return data[i:]
		}
	}
	return data
}

var rocmRE = regexp.MustCompile(`ROCm version: ([0-9][0-9.]*)`)

// amdThrottles are amd-smi metric's throttle accumulators that mean power or heat held
// the clocks down.
var amdThrottles = []string{"ppt", "socket_thermal", "vr_thermal", "hbm_thermal", "prochot"}

func readAMD(f *Fingerprint, static, metric []byte, version string) error {
	st, err := amdList(static)
	if err != nil {
		return errors.New("static --json: " + err.Error())
	}
	f.Vendor = "amd"
	if m := rocmRE.FindStringSubmatch(version); m != nil {
		f.Toolkit = "ROCm " + m[1]
	}
	metrics := map[int]map[string]any{}
	if len(metric) > 0 {
		ms, err := amdList(metric)
		if err != nil {
			return errors.New("metric --json: " + err.Error())
		}
		for _, m := range ms {
			metrics[int(val(m["gpu"]))] = m
		}
	}
	for _, g := range st {
		idx := int(val(g["gpu"]))
		gpu := GPU{Index: idx, Model: str(g, "asic", "market_name"), Serial: first(serial(str(g, "asic", "asic_serial")), serial(str(g, "board", "product_serial"))),
			UUID: first(str(g, "uuid"), str(g, "asic", "uuid")), MIG: first(str(g, "partition", "compute_partition"), str(g, "partition", "current_compute_partition")),
			MaxSMMHz: topLevel(path(g, "clock", "sys", "frequency_levels"))}
		if d := str(g, "driver", "version"); d != "" && f.Driver == "" {
			f.Driver = d
		}
		if ras, ok := g["ras"].(map[string]any); ok {
			if blocks, ok := ras["ecc_block_state"].(map[string]any); ok && len(blocks) > 0 {
				gpu.ECC = "Disabled"
				for _, s := range blocks {
					if s, _ := s.(string); strings.EqualFold(s, "ENABLED") {
						gpu.ECC = "Enabled"
					}
				}
			}
		}
		if lim, ok := g["limit"].(map[string]any); ok {
			for _, k := range []string{"socket_power", "max_power", "power_cap", "ppt0_power_limit"} {
				if gpu.PowerLimitW == 0 {
					gpu.PowerLimitW = val(lim[k])
				}
			}
		}
		if m := metrics[idx]; m != nil {
			readAMDMetric(&gpu, m)
		}
		f.GPUs = append(f.GPUs, gpu)
	}
	sort.SliceStable(f.GPUs, func(i, j int) bool { return f.GPUs[i].Index < f.GPUs[j].Index })
	return nil
}

// readAMDPartition fills in each GPU's compute partition from `amd-smi static --partition
// --json` (ROCm 7 leaves it out of the default static output).
func readAMDPartition(f *Fingerprint, data []byte) error {
	ps, err := amdList(data)
	if err != nil {
		return err
	}
	for _, p := range ps {
		idx := int(val(p["gpu"]))
		mig := first(str(p, "partition", "compute_partition"), str(p, "partition", "current_compute_partition"))
		for i := range f.GPUs {
			if f.GPUs[i].Index == idx && mig != "" {
				f.GPUs[i].MIG = mig
			}
		}
	}
	return nil
}

func readAMDMetric(gpu *GPU, m map[string]any) {
	gpu.PowerDrawW = first64(val(path(m, "power", "socket_power")), val(path(m, "power", "average_socket_power")))
	gpu.TemperatureC = first64(val(path(m, "temperature", "hotspot")), val(path(m, "temperature", "edge")))
	gpu.SMClockMHz = first64(val(path(m, "clock", "gfx_0", "clk")), val(path(m, "clock", "gfx_clock")))
	if v := val(path(m, "clock", "gfx_0", "max_clk")); v > 0 {
		gpu.MaxSMMHz = v // else the static output's highest sys level, when it lists them
	}
	gpu.MemClockMHz = first64(val(path(m, "clock", "mem_0", "clk")), val(path(m, "clock", "mem_clock")))
	th, _ := m["throttle"].(map[string]any)
	for _, k := range amdThrottles {
		if v, ok := th[k+"_accumulated"]; ok && isNumber(v) {
			if gpu.ThrottleCounters == nil {
				gpu.ThrottleCounters = map[string]float64{}
			}
			gpu.ThrottleCounters[k] = val(v)
		}
		if s, _ := th[k+"_violation_status"].(string); strings.EqualFold(strings.TrimSpace(s), "ACTIVE") {
			gpu.Throttle = append(gpu.Throttle, k)
		}
	}
}

// serial is a serial number as amd-smi prints it, "" for its placeholders ("0", all
// zeros): a serial it does not know is unknown, never a serial.
func serial(s string) string {
	if strings.Trim(s, "0x") == "" {
		return ""
	}
	return s
}

// topLevel is the highest of a clock's frequency levels ({"Level 0": "500 MHz", …}, as
// amd-smi static prints them since ROCm 6), 0 when it lists none.
func topLevel(v any) float64 {
	levels, _ := v.(map[string]any)
	top := 0.0
	for _, l := range levels {
		top = math.Max(top, val(l))
	}
	return top
}

func isNumber(v any) bool {
	switch x := v.(type) {
	case float64, json.Number:
		return true
	case map[string]any:
		return isNumber(x["value"])
	}
	return false
}

// val is a reading's number: a number, a {"value": …, "unit": …} object, or text such as
// "2100 MHz"; 0 for "N/A" and anything else.
func val(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return 0 // out of range (1e400): not recorded
		}
		return f
	case float64:
		return x
	case string:
		return number(x)
	case map[string]any:
		return val(x["value"])
	}
	return 0
}

func path(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

func str(m map[string]any, keys ...string) string {
	s, _ := path(m, keys...).(string)
	return na(s)
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func first64(xs ...float64) float64 {
	for _, x := range xs {
		if x != 0 {
			return x
		}
	}
	return 0
}
