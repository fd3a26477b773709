package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/semianalysis/opx/internal/results"
)

// counterRow is a counters-mode case as the page lists it.
type counterRow struct {
	Case, Series, Source, Kernels, Time, Read, Write, Declared, Ratio, L2, Tensor, Busy, Note string
	Cached                                                                                    bool
}

// mostCounterRows is how many counters-mode cases the page lists (export lists them all).
const mostCounterRows = 1000

// counterRows gathers counters-mode rows as they stream by.
type counterRows struct {
	Rows          []counterRow
	More, Cached  int
	Joined, Total int
}

func (cr *counterRows) add(r *results.Row) {
	if r.Mode != "counters" {
		return
	}
	cr.Total++
	row := counterRow{Case: r.Case(), Series: r.Series(), Note: r.CounterProblem}
	if c := r.Counters; c != nil {
		cr.Joined++
		row.Source, row.Kernels = c.Source, strconv.Itoa(c.Kernels)
		row.Time = dashNaN(c.KernelTimeUS, "µs")
		row.Read, row.Write = bytesText(c.DRAMRead), bytesText(c.DRAMWrite)
		row.L2, row.Tensor, row.Busy = dashNaN(c.L2HitPct, "%"), dashNaN(c.TensorPct, "%"), dashNaN(c.BusyPct, "%")
		row.Declared, row.Ratio = "—", "—"
		if d, q, ok := r.DeclaredBytes(); ok {
			row.Declared, row.Ratio = bytesText(d), strconv.FormatFloat(q, 'f', 2, 64)
			if q < results.CachedBelow {
				row.Cached = true
				cr.Cached++
				row.Note = "moved less than half its operands' bytes: timed on cached data"
			}
		}
	}
	if len(cr.Rows) == mostCounterRows {
		cr.More++
		return
	}
	cr.Rows = append(cr.Rows, row)
}

func dashNaN(x float64, unit string) string {
	if math.IsNaN(x) {
		return "—"
	}
	return strconv.FormatFloat(x, 'g', 4, 64) + " " + unit
}

func bytesText(b float64) string {
	switch {
	case math.IsNaN(b):
		return "—"
	case b >= 1e9:
		return fmt.Sprintf("%.3g GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.3g MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.3g kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}
