package ab

// A pull request's A/B report (ab.json): what each side was, the rules, and every selected
// case's judgement — what the PR comment and check say (Markdown, Conclusion).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/safe"
)

// Case is one selected case's judgement.
type Case struct {
	Key      string `json:"key"`
	Testlist string `json:"testlist"`
	Metric   string `json:"metric"`
	Lower    bool   `json:"lower_is_better"`
	// Why is why the case was selected (the file the change touched that maps to it)
	Why string `json:"why,omitempty"`
	// Outcome is measured when both sides were; else what the side that was not says
	// (error, missing, unsupported; "head: …" or "base: …" when the other side
	// measured it): no judgement then.
	Outcome string `json:"outcome"`
	// Lost is whether the base measured it and the head did not: the check fails on it.
	Lost bool `json:"lost,omitempty"`
	Result
}

// Report is a PR's A/B: its base and head (a commit and its image), the rules, the cases.
type Report struct {
	Base  string  `json:"base"`
	Head  string  `json:"head"`
	Rules Options `json:"rules"`
	Cases []Case  `json:"cases"`
}

// tally is the report's cases counted: by verdict (the measured ones), not judged, and
// those each of the check's rules fails on.
type tally struct {
	by                            map[Verdict]int
	unjudged, slower, lost, short int
}

func (r Report) tally() tally {
	t := tally{by: map[Verdict]int{}}
	for _, c := range r.Cases {
		if c.Lost {
			t.lost++
		}
		if c.Short(r.Rules) {
			t.short++
		}
		if c.Outcome != "measured" {
			t.unjudged++
			continue
		}
		t.by[c.Verdict]++
		if c.Fails {
			t.slower++
		}
	}
	return t
}

// Conclusion is the check's: failure when a case fails (slower, its interval beyond the
// threshold), when a case the base measured was not measured by the head (Lost), when a
// case was judged on fewer than MinPairs pairs (Short: the A/B ended early), or when
// nothing was judged (a check that measured nothing is never green); else success. A case
// neither side measured (unsupported on both, say), or new on the head, is named, not
// failed.
func (r Report) Conclusion() (string, string) {
	t := r.tally()
	judged := len(r.Cases) - t.unjudged
	switch {
	case t.slower > 0:
		return "failure", fmt.Sprintf("%d case(s) slower beyond %s", t.slower, pct(r.Rules.Threshold))
	case t.lost > 0:
		return "failure", fmt.Sprintf("%d case(s) the base measured and the head did not, or whose shard failed", t.lost)
	case judged == 0:
		return "failure", "nothing was measured on both sides"
	case t.short > 0:
		return "failure", fmt.Sprintf("%d case(s) the A/B ended before it could judge (fewer than %d pairs, or slower beyond %s with rounds left)", t.short, r.Rules.MinPairs, pct(r.Rules.Threshold))
	}
	return "success", fmt.Sprintf("%d case(s): none slower beyond %s (%d slower within it, %d unsure)", judged, pct(r.Rules.Threshold), t.by[Slower], t.by[Unsure])
}

func pct(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", 100*f), "0"), ".0") + "%"
}

// Marker is the hidden line that finds the PR's comment again (one comment, updated).
const Marker = "<!-- opx-pr-ab -->"

// MostRows is how many cases each of the comment's tables lists (the worst first).
const MostRows = 50

// Markdown is the PR comment: the verdict, counts, and the cases slower, unsure and not
// measured, each with its ratio and interval; outside text escaped (safe.Markdown).
func (r Report) Markdown() string { return r.markdown(MostRows) }

// Details is the Markdown with every case of each table (the check's text).
func (r Report) Details() string { return r.markdown(math.MaxInt) }

func (r Report) markdown(most int) string {
	var b strings.Builder
	conc, why := r.Conclusion()
	mark := "✅"
	if conc != "success" {
		mark = "❌"
	}
	t := r.tally()
	by, unjudged := t.by, t.unjudged
	fmt.Fprintf(&b, "%s\n## %s opx A/B: %s\n\nHead `%s` against base `%s`, measured in pairs on one node (%s). ", Marker, mark, safe.Markdown(why),
		strings.ReplaceAll(safe.OneLine(r.Head), "`", "'"), strings.ReplaceAll(safe.OneLine(r.Base), "`", "'"), "ABBA order")
	fmt.Fprintf(&b, "**%d cases:** %d slower, %d faster, %d same, %d unsure, %d not measured on both sides. The check fails on a slower case whose %.0f%% interval lies beyond %s.\n",
		len(r.Cases), by[Slower], by[Faster], by[Same], by[Unsure], unjudged, 100*r.Rules.Level, pct(r.Rules.Threshold))
	table := func(title string, keep func(Case) bool) {
		var rows []Case
		for _, c := range r.Cases {
			if keep(c) {
				rows = append(rows, c)
			}
		}
		if len(rows) == 0 {
			return
		}
		slices.SortStableFunc(rows, func(a, b Case) int { return cmp.Compare(worse(b), worse(a)) })
		fmt.Fprintf(&b, "\n### %s (%d)\n\n| Case | Metric | Head/base | %.0f%% interval | Pairs | Fails |\n|---|---|---:|---|---:|---|\n", title, len(rows), 100*r.Rules.Level)
		for i, c := range rows {
			if i == most {
				fmt.Fprintf(&b, "\n… and %d more (the check's details list them all).\n", len(rows)-most)
				break
			}
			fails := ""
			if c.Fails {
				fails = "**yes**"
			}
			if c.Outcome != "measured" {
				fmt.Fprintf(&b, "| %s | %s | %s | | | |\n", safe.Markdown(c.Key), safe.Markdown(c.Metric), safe.Markdown(c.Outcome))
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.3fx | %.3f–%.3f | %d | %s |\n", safe.Markdown(c.Key), safe.Markdown(c.Metric), c.Ratio, c.Lo, c.Hi, c.Pairs, fails)
		}
	}
	table("Slower", func(c Case) bool { return c.Outcome == "measured" && c.Verdict == Slower })
	table("Not measured on both sides", func(c Case) bool { return c.Outcome != "measured" })
	table("Unsure", func(c Case) bool { return c.Outcome == "measured" && c.Verdict == Unsure })
	table("Faster", func(c Case) bool { return c.Outcome == "measured" && c.Verdict == Faster })
	return b.String()
}

// worse orders a table worst first: by how far its estimate lies from 1, the metric's way.
func worse(c Case) float64 {
	if c.Ratio <= 0 || math.IsNaN(c.Ratio) {
		return 0
	}
	d := math.Log(c.Ratio)
	if !c.Lower {
		d = -d
	}
	return math.Abs(d)
}

// Write writes the report as JSON, atomically (files.WriteAtomicFunc): a reader never
// sees half of it.
func (r Report) Write(path string) error {
	return files.WriteAtomicFunc(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
}

// ReadReport reads an A/B report (ab.json), every field known: the one reader of the
// format (opx github report, opx run --ab's own).
func ReadReport(ctx context.Context, path string) (Report, error) {
	var r Report
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%s: not an A/B report: %w", path, err)
	}
	return r, nil
}
