// Corroboration and alerts: whether a first-night change's sibling cases moved with it,
// and the changes of one run grouped as a team triages them.

package history

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/compare"
)

// Corroboration and alerts: fewer, surer changes, in the unit a team triages.
//
// A change on its first night is corroborated when a sibling case moved with it — the same
// op on the same cluster (other shapes, dtypes, world sizes, backends) measured by the same
// run, with a change of the same direction first seen at that run — or when a confirmation
// run reproduced it. Where the run measured siblings and none moved, the change is
// uncorroborated: listed apart, and it does not fail the gate on its first night unless it
// is large (twice the gate's threshold); from its second run on (time has reproduced it)
// it is judged as any other. Where there is no sibling to ask, nothing changes.
//
// An alert is the changes of one run that share their first run, cluster, direction and
// what changed under them (source, image, driver, GPU, opx version; the nodes differ case
// by case): "27 gemm cases on h200, 1.08x–1.12x slower, from run nightly-12".

// sibling is what makes two series siblings: the same op on the same cluster.
type sibling struct{ op, cluster string }

// siblingsAt counts, per run id (store id) and sibling key, the series that run measured as
// their newest point (atTest).
type siblingsAt map[int64]map[sibling]int

func (s siblingsAt) add(run int64, k sibling) {
	if s[run] == nil {
		s[run] = map[sibling]int{}
	}
	s[run][k]++
}

// corroborate sets each first-night change's Corroboration (see above).
func (f *Found) corroborate() {
	moved := map[int64]map[sibling]map[string]int{} // run, siblings, direction: changes first seen there
	for _, c := range f.Changes {
		k := sibling{c.Op, c.cluster}
		if moved[c.run] == nil {
			moved[c.run] = map[sibling]map[string]int{}
		}
		if moved[c.run][k] == nil {
			moved[c.run][k] = map[string]int{}
		}
		moved[c.run][k][c.Direction]++
	}
	for i := range f.Changes {
		c := &f.Changes[i]
		if c.Runs != 1 || c.machineOnly() {
			continue // time has reproduced it, or it is no change of the code
		}
		if strings.HasPrefix(c.Confirmation, "confirmed") {
			c.Corroboration = c.Confirmation
			continue
		}
		k := sibling{c.Op, c.cluster}
		siblings := f.measuredAt[c.run][k] - 1
		if siblings <= 0 {
			continue // nothing to ask
		}
		if with := moved[c.run][k][c.Direction] - 1; with > 0 {
			c.Corroboration = fmt.Sprintf("%d of %d sibling cases moved with it", with, siblings)
			continue
		}
		c.Corroboration = fmt.Sprintf("none of %d sibling cases moved with it", siblings)
		c.Uncorroborated = true
	}
}

// waits is whether the gate waits for a second run (or a confirmation) before failing on
// the change: uncorroborated on its first night, and slower by less than twice pct.
func (c Change) waits(pct float64) bool {
	return c.Uncorroborated && c.Runs == 1 && compare.Slower == c.Direction && 1/c.SpeedupNow-1 < 2*pct/100
}

// An Alert is the changes of one run that share their first run, cluster, direction and
// what changed under them: the unit a team triages.
type Alert struct {
	// ID names the group: the same first run, cluster, direction and provenance have the
	// same id on every night (opx history notify announces each id once)
	ID        string `json:"id"`
	RunID     string `json:"run_id"`
	Cluster   string `json:"cluster"`
	Direction string `json:"direction"`
	// Ops are the ops of its cases, with how many cases each.
	Ops map[string]int `json:"ops"`
	// Speedup is the range of its changes' speedups, as compare says them.
	SpeedupMin float64 `json:"speedup_min"`
	SpeedupMax float64 `json:"speedup_max"`
	// Provenance is what changed under it (nodes aside).
	Provenance string   `json:"provenance"`
	Changes    []string `json:"changes"` // the changes' ids
	name       string
}

// alerts groups the changes into alerts, the largest first.
func (f *Found) alerts() []Alert {
	by := map[string]*Alert{}
	var order []string
	for _, c := range f.Changes {
		if c.machineOnly() {
			continue // a change of machine: said with the change, no alert of the code
		}
		prov := c.provenanceExcept("nodes")
		key := strings.Join([]string{c.RunID, c.at.UTC().Format(time.RFC3339), c.cluster, c.Direction, prov}, "\x00")
		a := by[key]
		if a == nil {
			a = &Alert{ID: alertID(key), RunID: c.RunID, Cluster: c.Cluster, Direction: c.Direction, Ops: map[string]int{}, Provenance: prov,
				SpeedupMin: math.Inf(1), SpeedupMax: math.Inf(-1), name: c.RunName()}
			by[key] = a
			order = append(order, key)
		}
		a.Ops[c.Op]++
		a.SpeedupMin, a.SpeedupMax = math.Min(a.SpeedupMin, c.Speedup), math.Max(a.SpeedupMax, c.Speedup)
		a.Changes = append(a.Changes, c.ID)
	}
	out := make([]Alert, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Direction == compare.Slower) != (out[j].Direction == compare.Slower) {
			return out[i].Direction == compare.Slower
		}
		return len(out[i].Changes) > len(out[j].Changes)
	})
	return out
}

// alertID is the id of the alert of key: 12 hex digits of its SHA-256.
func alertID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "a" + hex.EncodeToString(h[:6])
}

// Line is the alert in one line (line).
func (a Alert) Line() string { return a.line() }

// line is the alert in one line: "27 gemm cases on h200, 1.08x–1.12x slower, from run
// nightly-12 of 2026-11-09T02:00Z (image digest sha256:a → sha256:b)".
func (a Alert) line() string {
	ops := slices.Sorted(func(yield func(string) bool) {
		for op := range a.Ops {
			if !yield(op) {
				return
			}
		}
	})
	var what []string
	for _, op := range ops {
		what = append(what, fmt.Sprintf("%d %s", a.Ops[op], op))
	}
	cases := "cases"
	if len(a.Changes) == 1 {
		cases = "case"
	}
	size := compare.Words(a.SpeedupMin)
	if a.SpeedupMax != a.SpeedupMin {
		lo, hi := compare.Words(a.SpeedupMin), compare.Words(a.SpeedupMax)
		if a.Direction == compare.Slower {
			lo, hi = hi, lo
		}
		size = strings.TrimSuffix(strings.TrimSuffix(lo, " slower"), " faster") + "–" + hi
	}
	s := fmt.Sprintf("%s %s on %s, %s, from run %s", strings.Join(what, ", "), cases, a.Cluster, size, a.name)
	if a.Provenance != "" {
		s += " (" + a.Provenance + ")"
	}
	return s
}
