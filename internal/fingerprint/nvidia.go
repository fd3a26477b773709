package fingerprint

import (
	"encoding/xml"
	"sort"
	"strconv"
	"strings"
)

// smiLog is the part of `nvidia-smi -q -x` (nvsmi_device DTD) a fingerprint keeps. Drivers
// from 535 name throttle reasons clocks_throttle_reasons and power power_readings; newer
// ones (550+) clocks_event_reasons, clocks_event_reasons_counters and gpu_power_readings:
// both are read.
type smiLog struct {
	Driver string   `xml:"driver_version"`
	CUDA   string   `xml:"cuda_version"`
	GPUs   []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	Product  string  `xml:"product_name"`
	Serial   string  `xml:"serial"`
	UUID     string  `xml:"uuid"`
	MIG      string  `xml:"mig_mode>current_mig"`
	ECC      string  `xml:"ecc_mode>current_ecc"`
	Temp     string  `xml:"temperature>gpu_temp"`
	SM       string  `xml:"clocks>sm_clock"`
	Mem      string  `xml:"clocks>mem_clock"`
	MaxSM    string  `xml:"max_clocks>sm_clock"`
	Power    smiPwr  `xml:"gpu_power_readings"`
	OldPower smiPwr  `xml:"power_readings"`
	Events   smiList `xml:"clocks_event_reasons"`
	Throttle smiList `xml:"clocks_throttle_reasons"`
	Counters smiList `xml:"clocks_event_reasons_counters"`
}

type smiPwr struct {
	Current  string `xml:"current_power_limit"`
	Limit    string `xml:"power_limit"`
	Enforced string `xml:"enforced_power_limit"`
	Draw     string `xml:"power_draw"`
	Instant  string `xml:"instant_power_draw"`
}

// smiList is an element whose children are name → value readings.
type smiList struct {
	Items []struct {
		XMLName xml.Name
		Value   string `xml:",chardata"`
	} `xml:",any"`
}

// slowdowns are the throttle reasons that mean power or heat held the clocks down (idle,
// application clocks, sync boost and display settings do not).
var slowdowns = []string{"sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown",
	"sw_therm_slowdown", "hw_therm_slowdown", "hw_power_brake"}

func isSlowdown(reason string) bool {
	for _, s := range slowdowns {
		if reason == s {
			return true
		}
	}
	return false
}

func readNVIDIA(f *Fingerprint, data []byte) error {
	var log smiLog
	d := xml.NewDecoder(strings.NewReader(string(data)))
	d.Strict = false // the DOCTYPE names a DTD nvidia-smi does not ship
	if err := d.Decode(&log); err != nil {
		return err
	}
	f.Vendor, f.Driver = "nvidia", log.Driver
	if log.CUDA != "" {
		f.Toolkit = "CUDA " + log.CUDA
	}
	// a GPU's index is its place in the list: nvidia-smi lists GPUs in PCI bus order, the
	// order NVML, CUDA_VISIBLE_DEVICES and Slurm's GPU ids use. Its minor_number (the
	// /dev/nvidiaN it is) differs from that order on some machines, so it is never the index.
	for i, g := range log.GPUs {
		gpu := GPU{Index: i, Model: g.Product, Serial: na(g.Serial), UUID: na(g.UUID), MIG: na(g.MIG), ECC: na(g.ECC),
			TemperatureC: number(g.Temp), SMClockMHz: number(g.SM), MemClockMHz: number(g.Mem), MaxSMMHz: number(g.MaxSM)}
		for _, v := range []string{g.Power.Current, g.OldPower.Enforced, g.OldPower.Limit} {
			if gpu.PowerLimitW == 0 {
				gpu.PowerLimitW = number(v)
			}
		}
		for _, v := range []string{g.Power.Instant, g.Power.Draw, g.OldPower.Draw} {
			if gpu.PowerDrawW == 0 {
				gpu.PowerDrawW = number(v)
			}
		}
		for _, r := range append(g.Events.Items, g.Throttle.Items...) {
			name := strings.TrimPrefix(strings.TrimPrefix(r.XMLName.Local, "clocks_event_reason_"), "clocks_throttle_reason_")
			if strings.TrimSpace(r.Value) == "Active" {
				gpu.Throttle = append(gpu.Throttle, name)
			}
		}
		for _, c := range g.Counters.Items {
			if v := strings.TrimSpace(c.Value); v != "" && v != "N/A" {
				if gpu.ThrottleCounters == nil {
					gpu.ThrottleCounters = map[string]float64{}
				}
				gpu.ThrottleCounters[strings.TrimPrefix(c.XMLName.Local, "clocks_event_reasons_counters_")] = number(v)
			}
		}
		f.GPUs = append(f.GPUs, gpu)
	}
	sort.SliceStable(f.GPUs, func(i, j int) bool { return f.GPUs[i].Index < f.GPUs[j].Index })
	return nil
}

// na is "" for the tools' "N/A" (and blank) readings.
func na(s string) string {
	s = strings.TrimSpace(s)
	if s == "N/A" || s == "[N/A]" {
		return ""
	}
	return s
}

// number is the leading number of a reading such as "1980 MHz", "700.00 W", "45 C",
// "91403239 us"; 0 when there is none.
func number(s string) float64 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] == '.' || s[end] == '-' || (s[end] >= '0' && s[end] <= '9')) {
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0
	}
	return v
}
