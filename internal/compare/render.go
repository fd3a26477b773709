package compare

// What compare writes: the Markdown summary for a step summary, and the JSON of every case
// (WriteJSON; each case's line by json.go).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/par"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/safe"
)

// label names a side's run in the Markdown: its id, source SHA and time, each labelled
// ("run local, source unknown, measured 2026-12-06 03:13 UTC").
func (s Side) label() string {
	l := "run " + safe.Markdown(s.RunID) + ", source " + safe.Markdown(short(s.SourceSHA))
	if t, err := time.Parse(time.RFC3339, s.At); err == nil {
		l += ", measured " + t.UTC().Format("2006-01-02 15:04 UTC")
	}
	return l
}

// WriteJSON writes the result as one JSON document, a case a line, without holding its
// text whole: {"base", "new", "thresholds", "counts", "cases": [...]}.
func (r *Result) WriteJSON(ctx context.Context, w io.Writer) error {
	return r.writeJSON(ctx, w, 0, len(r.cases), false)
}

// WriteJSONWindow writes the result with the cases [from, to) of its order alone (the
// worst first), and where they lie: "cases_total" (every case) and "cases_from" (the
// first one's index) before "cases". A window past the end holds no case.
func (r *Result) WriteJSONWindow(ctx context.Context, w io.Writer, from, to int) error {
	from, to = max(0, min(from, len(r.cases))), max(0, min(to, len(r.cases)))
	return r.writeJSON(ctx, w, from, max(from, to), true)
}

func (r *Result) writeJSON(ctx context.Context, w io.Writer, from, to int, window bool) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	head, err := json.Marshal(r) // all but the cases, which are not exported
	if err != nil {
		return err
	}
	bw.Write(head[:len(head)-1])
	if window {
		fmt.Fprintf(bw, `,"cases_total":%d,"cases_from":%d`, len(r.cases), from)
	}
	bw.WriteString(`,"cases":[`)
	// the cases encoded on every core, a chunk at a time into buffers used again, and
	// written in order
	const chunk = 1024
	err = par.Ordered(ctx, (to-from+chunk-1)/chunk, 0, func(_ context.Context, i int) (*[]byte, error) {
		out := caseLines.Get().(*[]byte)
		b := (*out)[:0]
		var room []Metric // each case's metrics, in the room of the last: written, then let go
		for k := from + i*chunk; k < min(from+(i+1)*chunk, to); k++ {
			if k > from {
				b = append(b, ',')
			}
			b = append(b, '\n')
			j := &r.cases[k]
			c := build(j.key, j.b, j.n, r.Options, true, room)
			var err error
			if b, err = appendCase(b, &c); err != nil { // as json.Marshal writes it
				return nil, err
			}
			if c.Metrics != nil {
				room = c.Metrics
			}
		}
		*out = b
		return out, nil
	}, func(_ int, out *[]byte) error {
		_, err := bw.Write(*out)
		caseLines.Put(out)
		return err
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// caseLines hold a chunk of the cases as WriteJSON writes them.
var caseLines = sync.Pool{New: func() any { return new([]byte) }}

// Markdown writes the summary for a GitHub step summary: counts, then regressions worst
// first, broken cases, improvements, ambiguous ones, and cases in one run only.
func (r *Result) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## opx compare\n\n")
	fmt.Fprintf(w, "Base: `%s` (%s) · New: `%s` (%s)\n\n", r.Base.Dir, r.Base.label(), r.New.Dir, r.New.label())
	var parts []string
	for _, c := range classOrder {
		if n := r.Counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no cases"}
	}
	fmt.Fprintf(w, "**%d cases:** %s. Same = change below %s; faster/slower = outside both runs' spread (%s without a spread). Joined on %s.\n",
		len(r.cases), strings.Join(parts, ", "), pct(r.Options.Same), pct(r.Options.NoSpread), strings.Join(r.Options.Key, ", "))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "\n**Cannot be trusted:** %s.\n", safe.Markdown(p))
	}
	for _, p := range r.Warnings {
		fmt.Fprintf(w, "\n**Warning:** %s.\n", safe.Markdown(p))
	}
	if len(r.Nodes) > 0 {
		fmt.Fprintf(w, "\n**The runs' nodes differ** (their fingerprints): %s. A change may be the node's, not the code's.\n", cell(strings.Join(r.Nodes, "; ")))
	}
	if r.Throttled["base"]+r.Throttled["new"] > 0 {
		fmt.Fprintf(w, "\n**Throttled GPUs:** %d base and %d new row(s) were measured on a GPU that power or heat held down while its shard ran.\n", r.Throttled["base"], r.Throttled["new"])
	}
	if r.Contended["base"]+r.Contended["new"] > 0 {
		fmt.Fprintf(w, "\n**Measured under contention:** %d base and %d new row(s) were measured while another opx run measured on their machine, or while it was busier than its cores: their changes may be the contention's, not the code's. The gate fails, as \"measured under contention: re-measure\", on every such case slower than the threshold and on every case whose base was contended (a contended base is no baseline): run them again on a quiet machine.\n", r.Contended["base"], r.Contended["new"])
	}
	r.table(w, "Regressions (worst first)", Slower, false)
	r.statusTable(w, "Broken: ok in base, not ok now", Broken)
	r.table(w, "Impossible: above the hardware's limit in one run (timer, cache or peak wrong)", Impossible, false)
	r.table(w, "Improvements (best first)", Faster, false)
	r.statusTable(w, "Fixed: not ok in base, ok now", Fixed)
	r.table(w, "Ambiguous: moved, but within the noise", Ambiguous, true)
	r.statusTable(w, "Only in base (missing from new)", OnlyBase)
	r.statusTable(w, "Only in new", OnlyNew)
}

// TableRows is how many cases a table of the Markdown lists (the worst first): a step
// summary holds at most 1 MiB, and --json has every case.
const TableRows = 100

// pick is the first n cases of a class, in the result's order, and how many it has.
func (r *Result) pick(class string, n int) ([]Case, int) {
	var out []Case
	total := 0
	for i, c := range r.cases {
		if c.class == class {
			if total < n {
				out = append(out, r.Case(i))
			}
			total++
		}
	}
	return out, total
}

func (r *Result) table(w io.Writer, title, class string, folded bool) {
	cs, total := r.pick(class, TableRows)
	if total == 0 {
		return
	}
	if folded {
		fmt.Fprintf(w, "\n<details><summary>%s (%d)</summary>\n\n", title, total)
	} else {
		fmt.Fprintf(w, "\n### %s (%d)\n\n", title, total)
	}
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Metric | Base | New | Change | Noise |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
	for _, c := range cs {
		p := c.Primary
		change := p.Change
		if why := UnderContention(&c); why != "" {
			change += " · " + why
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args),
			cell(c.Backend), cell(c.Cluster), c.WorldSize, p.Name, results.Format(p.Name, p.Base), results.Format(p.Name, p.New),
			change, cell(p.Noise))
	}
	more(w, total-len(cs))
	if folded {
		fmt.Fprintln(w, "\n</details>")
	}
}

func (r *Result) statusTable(w io.Writer, title, class string) {
	cs, total := r.pick(class, TableRows)
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "\n### %s (%d)\n\n", title, total)
	fmt.Fprintln(w, "| Case | Backend | Cluster | WS | Base status | New status | Message |")
	fmt.Fprintln(w, "| --- | --- | --- | ---: | --- | --- | --- |")
	for _, c := range cs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s |\n", cell(c.Testlist+" "+c.OpType+" "+c.Args), cell(c.Backend),
			cell(c.Cluster), c.WorldSize, dash(c.BaseStatus), dash(c.NewStatus), cell(safe.Trunc(c.NewMessage, 160)))
	}
	more(w, total-len(cs))
}

// more says how many cases a table left out.
func more(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "\n… and %d more (`opx compare --json FILE` lists every case).\n", n)
	}
}

// cell escapes a markdown table cell.
func cell(s string) string { return safe.Markdown(s) }

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
