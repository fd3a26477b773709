package fingerprint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Throttle is what a shard's two snapshots say about throttling while it ran: the GPUs it
// used (indexes below worldSize) that power or heat held down, and why.
type Throttle struct {
	GPUs    []int
	Reasons []string
}

// String is the throttle as rows and pages say it: "GPU 0, 3: sw_power_cap" ("" when
// no GPU was throttled).
func (t Throttle) String() string {
	if len(t.GPUs) == 0 {
		return ""
	}
	ids := make([]string, len(t.GPUs))
	for i, g := range t.GPUs {
		ids[i] = strconv.Itoa(g)
	}
	return "GPU " + strings.Join(ids, ", ") + ": " + strings.Join(t.Reasons, ", ")
}

// Throttled compares before and after. A throttle counter that grew between them is
// throttling during the shard; a GPU without counters (older drivers) is judged by the
// reasons active in either snapshot. Either snapshot may be nil.
func Throttled(before, after *Fingerprint, worldSize int) Throttle {
	var t Throttle
	reasons := map[string]bool{}
	snap := after
	if snap == nil {
		snap = before
	}
	if snap == nil {
		return t
	}
	for _, g := range snap.GPUs {
		if worldSize > 0 && g.Index >= worldSize {
			continue
		}
		var was *GPU
		if before != nil && snap != before {
			for i := range before.GPUs {
				if before.GPUs[i].Index == g.Index {
					was = &before.GPUs[i]
				}
			}
		}
		hit := false
		if len(g.ThrottleCounters) > 0 && was != nil && len(was.ThrottleCounters) > 0 {
			for k, v := range g.ThrottleCounters {
				if (isSlowdown(k) || slices.Contains(amdThrottles, k)) && v > was.ThrottleCounters[k] {
					reasons[k], hit = true, true
				}
			}
		} else {
			active := g.Throttle
			if was != nil {
				active = append(append([]string(nil), active...), was.Throttle...)
			}
			for _, r := range active {
				if isSlowdown(r) || slices.Contains(amdThrottles, r) {
					reasons[r], hit = true, true
				}
			}
		}
		if hit {
			t.GPUs = append(t.GPUs, g.Index)
		}
	}
	t.Reasons = slices.Sorted(maps.Keys(reasons))
	return t
}

// Node is a snapshot's facts that decide what a GPU can do, each as the distinct values its
// GPUs report: what compare sets side by side.
type Node struct {
	Models, Driver, Toolkit, PowerLimit, MaxSMClock, ECC, MIG string
}

// Summary is the snapshot's Node.
func (f *Fingerprint) Summary() Node {
	set := func(get func(GPU) string) string {
		seen := map[string]bool{}
		for _, g := range f.GPUs {
			if v := get(g); v != "" {
				seen[v] = true
			}
		}
		return strings.Join(slices.Sorted(maps.Keys(seen)), ", ")
	}
	num := func(x float64, unit string) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'f', -1, 64) + " " + unit
	}
	return Node{Models: set(func(g GPU) string { return g.Model }), Driver: f.Driver, Toolkit: f.Toolkit,
		PowerLimit: set(func(g GPU) string { return num(g.PowerLimitW, "W") }),
		MaxSMClock: set(func(g GPU) string { return num(g.MaxSMMHz, "MHz") }),
		ECC:        set(func(g GPU) string { return g.ECC }), MIG: set(func(g GPU) string { return g.MIG })}
}

// Differences says where two nodes differ in what decides a GPU's speed: GPU model,
// driver, CUDA/ROCm, power limit, max SM clock, ECC, MIG — "driver 550.54.15 → 570.86.10".
func Differences(a, b Node) []string {
	var out []string
	for _, f := range []struct{ name, x, y string }{{"GPU", a.Models, b.Models}, {"driver", a.Driver, b.Driver},
		{"toolkit", a.Toolkit, b.Toolkit}, {"power limit", a.PowerLimit, b.PowerLimit}, {"max SM clock", a.MaxSMClock, b.MaxSMClock},
		{"ECC", a.ECC, b.ECC}, {"MIG", a.MIG, b.MIG}} {
		if f.x != f.y && f.x != "" && f.y != "" {
			out = append(out, fmt.Sprintf("%s %s → %s", f.name, f.x, f.y))
		}
	}
	return out
}

// Merge is the nodes' facts together: each field the distinct values of all of them.
func Merge(nodes []Node) Node {
	join := func(get func(Node) string) string {
		seen := map[string]bool{}
		for _, n := range nodes {
			for _, v := range strings.Split(get(n), ", ") {
				if v != "" {
					seen[v] = true
				}
			}
		}
		return strings.Join(slices.Sorted(maps.Keys(seen)), ", ")
	}
	return Node{Models: join(func(n Node) string { return n.Models }), Driver: join(func(n Node) string { return n.Driver }),
		Toolkit: join(func(n Node) string { return n.Toolkit }), PowerLimit: join(func(n Node) string { return n.PowerLimit }),
		MaxSMClock: join(func(n Node) string { return n.MaxSMClock }), ECC: join(func(n Node) string { return n.ECC }),
		MIG: join(func(n Node) string { return n.MIG })}
}
