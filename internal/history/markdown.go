// Rendering: check's findings as Markdown for $GITHUB_STEP_SUMMARY, worst first.

package history

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/safe"
)

// mostRows is how many changes (and stopped series) the Markdown lists: a step summary
// stays readable, and the JSON has them all.
const mostRows = 50

// Markdown writes what check found for $GITHUB_STEP_SUMMARY, worst first.
func (f *Found) Markdown(w io.Writer) {
	fmt.Fprintln(w, "## opx history check")
	fmt.Fprintln(w)
	if f.Newest == nil {
		fmt.Fprintln(w, "The store holds no run yet.")
		return
	}
	slower, suspected := 0, 0
	for _, c := range f.Changes {
		if c.Direction == compare.Slower {
			slower++
		}
		if c.Status == Suspected {
			suspected++
		}
	}
	fmt.Fprintf(w, "%d series (%d points) checked at run %s: %d changes (%d slower, %d faster; %d suspected), %d series not measured by it, %d too young to judge.\n\n",
		f.Series, f.Points, cell(f.Newest.Name()), len(f.Changes), slower, len(f.Changes)-slower, suspected, len(f.Unmeasured), len(f.Young))
	if f.Series == 0 {
		fmt.Fprintln(w, "Nothing was judged: no series matched.")
		fmt.Fprintln(w)
	}
	bullets(w, "**Alerts** (the changes of one run that share their first run, cluster, direction and what changed under them):", len(f.Alerts), func(i int) string {
		return cell(f.Alerts[i].line())
	})
	if len(f.Changes) > 0 {
		fmt.Fprintln(w, "| Case | Metric | Change | From run | Status | New | Runs since | What changed | Nodes | Triage |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---:|---|---|---|")
		for i, c := range f.Changes {
			if i == mostRows {
				fmt.Fprintf(w, "\n… and %d more (the JSON has them all)\n", len(f.Changes)-mostRows)
				break
			}
			status := c.Status
			if c.Confirmation != "" {
				status = c.Confirmation
			}
			isNew := ""
			if c.New {
				isNew = "new"
			}
			words := compare.Words(c.Speedup)
			if c.MachinesChanged != "" {
				words += " (machines changed: " + c.MachinesChanged + "; " + machinesWords[c.Machines] + ")"
			}
			if f.ServeURL != "" { // the change's page on the team's opx serve
				words = "[" + words + "](" + strings.TrimRight(f.ServeURL, "/") + "/series?key=" + url.QueryEscape(c.Key) + "#" + c.ID + ")"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %d | %s | %s | `%s` %s |\n", cell(CaseName(c.Key)), cell(c.Metric), words, cell(c.RunName()),
				cell(status), isNew, c.Runs, cell(c.provenanceText()), cell(strings.Join(c.Nodes, ", ")), c.ID, c.Triage)
		}
		fmt.Fprintln(w)
	}
	if f.Gate != nil {
		var waiting []Change
		for _, c := range f.Changes {
			if !f.Gate.NewOnly && c.waits(f.Gate.Pct) && c.Triage != TriageExpected && c.Triage != TriageInvalid {
				waiting = append(waiting, c)
			}
		}
		bullets(w, fmt.Sprintf("**Uncorroborated: the gate waits for a second run** (slower on its first night only, and no sibling case of the run moved with it; it fails the gate from its second run, or a confirmation run, and at once at %g%% or more):", 2*f.Gate.Pct), len(waiting), func(i int) string {
			c := waiting[i]
			return fmt.Sprintf("%s: %s at run %s (%s)", cell(CaseName(c.Key)), compare.Words(c.SpeedupNow), cell(c.RunName()), cell(c.Corroboration))
		})
		bad := f.Regressions(*f.Gate)
		bullets(w, fmt.Sprintf("**Fails the gate** (slower by at least %g%% and standing; nobody has decided):", f.Gate.Pct), len(bad), func(i int) string {
			c := bad[i]
			return fmt.Sprintf("%s: %s now, since run %s (%s): release it with `opx history triage %s --state expected` (or `invalid`)",
				cell(CaseName(c.Key)), compare.Words(c.SpeedupNow), cell(c.RunName()), c.Triage, c.ID)
		})
	}
	bullets(w, "**Measured under contention** (another opx run on the machine, or a busy machine: never the evidence of a change; the gate asks for those slower than their quiet level, or with none yet, to be measured again):", len(f.Contended), func(i int) string {
		c := f.Contended[i]
		vs := "no quiet level yet"
		if c.Ratio > 0 {
			vs = compare.Words(c.Speedup) + " than its quiet level"
		}
		return fmt.Sprintf("%s at run %s: %s (%s)", cell(CaseName(c.Key)), cell(c.RunID), vs, cell(c.Why))
	})
	kinds := byKindGroups(f.ByKind)
	bullets(w, "**Judged against their own kind of machine** (the pool's kinds measure at levels of their own: each run is set against its kind's level, so a change of the mix is no change):", len(kinds), func(i int) string {
		return cell(kinds[i])
	})
	bullets(w, "**Cleared by a confirmation run** (measured again elsewhere, at the old level):", len(f.Cleared), func(i int) string {
		c := f.Cleared[i]
		why := "noise"
		if c.Reason == "node" {
			why = "node " + cell(c.Node) + " alone"
		}
		return fmt.Sprintf("%s at run %s: %s (run %s)", cell(CaseName(c.Key)), cell(c.RunID), why, cell(c.By))
	})
	bullets(w, "**Not measured by this run** (error or missing: the gate fails on them):", len(f.Unmeasured), func(i int) string {
		return cell(CaseName(f.Unmeasured[i].Key)) + ": " + f.Unmeasured[i].Outcome
	})
	bullets(w, "**No longer measured** (measured by the run before, not by this one):", len(f.Stopped), func(i int) string {
		return cell(CaseName(f.Stopped[i].Key)) + ": " + f.Stopped[i].Outcome
	})
	bullets(w, fmt.Sprintf("**Too young to judge** (a series needs %d measured runs):", changes.MinRef+1), len(f.Young), func(i int) string {
		return fmt.Sprintf("%s: %d of %d runs", cell(CaseName(f.Young[i].Key)), f.Young[i].Runs, f.Young[i].Needs)
	})
	if len(f.OddNodes) > 0 {
		nodes := make([]string, 0, len(f.OddNodes))
		for n := range f.OddNodes {
			nodes = append(nodes, n)
		}
		sort.SliceStable(nodes, func(i, j int) bool {
			if f.OddNodes[nodes[i]] != f.OddNodes[nodes[j]] {
				return f.OddNodes[nodes[i]] > f.OddNodes[nodes[j]]
			}
			return nodes[i] < nodes[j]
		})
		var parts []string
		for _, n := range nodes {
			parts = append(parts, fmt.Sprintf("%s (%d)", cell(n), f.OddNodes[n]))
		}
		fmt.Fprintf(w, "**Nodes that were the odd one out** (changes confined to them): %s\n", strings.Join(parts, ", "))
	}
}

// bullets is a titled list of n items (none: nothing), at most mostRows of them.
func bullets(w io.Writer, title string, n int, item func(i int) string) {
	if n == 0 {
		return
	}
	fmt.Fprintln(w, title)
	fmt.Fprintln(w)
	for i := range min(n, mostRows) {
		fmt.Fprintf(w, "- %s\n", item(i))
	}
	if n > mostRows {
		fmt.Fprintf(w, "- … and %d more\n", n-mostRows)
	}
	fmt.Fprintln(w)
}

// provenanceText is what changed under the shift, in one line: "driver 550.54 → 555.42".
func (c *Change) provenanceText() string { return c.provenanceExcept("") }

// provenanceExcept is provenanceText without the field skip.
func (c *Change) provenanceExcept(skip string) string {
	var parts []string
	for _, f := range provenanceFields {
		if f == skip {
			continue
		}
		d, ok := c.Provenance[f]
		if !ok {
			continue
		}
		before, after := d.Before, d.After
		if f == "source_sha" {
			before, after = short(before), short(after)
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s", strings.ReplaceAll(f, "_", " "), orNone(before), orNone(after)))
	}
	return strings.Join(parts, "; ")
}

func short(sha string) string {
	if len(sha) > 12 && !slices.Contains([]byte(sha), ' ') {
		return sha[:12]
	}
	return sha
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func cell(s string) string { return safe.Markdown(s) }

// byKindGroups are the series judged against their own kind's level, one line per kind:
// "MI300X at 1900 MHz: 72 series, 1.3x–1.7x the metric of MI300X at 2100 MHz".
func byKindGroups(ks []KindLevel) []string {
	type group struct {
		n      int
		lo, hi float64
		of     map[string]bool
	}
	by := map[string]*group{}
	var order []string
	for _, k := range ks {
		g := by[k.Kind]
		if g == nil {
			g = &group{lo: k.Ratio, hi: k.Ratio, of: map[string]bool{}}
			by[k.Kind] = g
			order = append(order, k.Kind)
		}
		g.n++
		g.lo, g.hi = math.Min(g.lo, k.Ratio), math.Max(g.hi, k.Ratio)
		g.of[k.Of] = true
	}
	out := make([]string, 0, len(order))
	for _, kind := range order {
		g := by[kind]
		span := fmt.Sprintf("%.2fx", g.lo)
		if g.hi-g.lo >= 0.005 {
			span = fmt.Sprintf("%.2fx–%.2fx", g.lo, g.hi)
		}
		out = append(out, fmt.Sprintf("%s: %d series, %s the metric of %s", kind, g.n, span, strings.Join(slices.Sorted(maps.Keys(g.of)), ", ")))
	}
	return out
}
