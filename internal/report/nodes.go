package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/results"
)

// nodeRow is a shard's node as its fingerprints recorded it, around the newest attempt's
// benchmark.
type nodeRow struct {
	Shard, Node, GPUs, Driver, Toolkit, PowerLimit, MaxSM, ECC, MIG, Temp, Stack, Throttle, Missing string
	CPU, Cores, Clock, Governor, Load, Others                                                       string // the machine's CPU, for a local run
	Bad                                                                                             bool
}

// nodes is the provenance's node table, and how many shards ran on a throttled GPU.
func nodes(run *results.Run) ([]nodeRow, int) {
	var rows []nodeRow
	throttled := 0
	for _, s := range run.Shards {
		f := s.Before
		if f == nil {
			f = s.After
		}
		if f == nil {
			continue
		}
		sum := f.Summary()
		row := nodeRow{Shard: s.ID, Node: dash(f.Node), GPUs: dash(gpuList(f)), Driver: dash(sum.Driver), Toolkit: dash(sum.Toolkit),
			PowerLimit: dash(sum.PowerLimit), MaxSM: dash(sum.MaxSMClock), ECC: dash(sum.ECC), MIG: dash(sum.MIG),
			Temp: temps(s.Before, s.After), Stack: dash(stack(f)), Throttle: "—", Missing: dash(strings.Join(f.Missing, "; "))}
		row.CPU, row.Governor = dash(f.CPU), dash(f.Governor)
		row.Cores = dash(strings.TrimPrefix(strconv.Itoa(f.Cores), "0"))
		if f.CPUMHz > 0 {
			row.Clock = strconv.FormatFloat(f.CPUMHz, 'f', -1, 64) + " MHz"
		}
		row.Clock, row.Load = dash(row.Clock), loads(s.Before, s.After)
		if o := fingerprint.Contention(s.Before, s.After, s.WorldSize); o != "" {
			row.Others, row.Bad = o, true
		}
		row.Others = dash(row.Others)
		if len(s.Throttle.GPUs) > 0 {
			throttled++
			row.Bad = true
			row.Throttle = s.Throttle.String()
		}
		rows = append(rows, row)
	}
	return rows, throttled
}

func gpuList(f *fingerprint.Fingerprint) string {
	count := map[string]int{}
	var order []string
	for _, g := range f.GPUs {
		if count[g.Model] == 0 {
			order = append(order, g.Model)
		}
		count[g.Model]++
	}
	var out []string
	for _, m := range order {
		out = append(out, fmt.Sprintf("%d × %s", count[m], m))
	}
	return strings.Join(out, ", ")
}

func stack(f *fingerprint.Fingerprint) string {
	var out []string
	if f.CPU != "" {
		out = append(out, f.CPU)
	}
	if f.Kernel != "" {
		out = append(out, "Linux "+f.Kernel)
	}
	if f.Enroot != "" {
		out = append(out, "enroot "+f.Enroot)
	}
	if f.Pyxis != "" {
		out = append(out, "pyxis "+f.Pyxis)
	}
	return strings.Join(out, " · ")
}

// loads is the 1-minute load average before and after the benchmark.
func loads(before, after *fingerprint.Fingerprint) string {
	one := func(f *fingerprint.Fingerprint) string {
		if f == nil || len(f.Load) == 0 {
			return "?"
		}
		return strconv.FormatFloat(f.Load[0], 'f', 2, 64)
	}
	if one(before) == "?" && one(after) == "?" {
		return "—"
	}
	return one(before) + " → " + one(after)
}

// temps is the hottest GPU before and after the benchmark.
func temps(before, after *fingerprint.Fingerprint) string {
	hot := func(f *fingerprint.Fingerprint) string {
		if f == nil {
			return "?"
		}
		m := 0.0
		for _, g := range f.GPUs {
			m = max(m, g.TemperatureC)
		}
		if m == 0 {
			return "?"
		}
		return strconv.FormatFloat(m, 'f', -1, 64) + " °C"
	}
	if before == nil && after == nil {
		return "—"
	}
	return hot(before) + " → " + hot(after)
}
