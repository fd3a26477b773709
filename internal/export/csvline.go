package export

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/semianalysis/opx/internal/results"
)

// csvLine is a record's CSV line as an encoding/csv Writer writes it (comma-separated, no
// CRLF, a cell quoted where the Writer quotes it), each cell made safe to open in a
// spreadsheet first (OWASP's rule for CSV injection: a cell that starts with =, +, -, @,
// a tab or a carriage return and is not a number gets a leading ', so
// "=cmd|' /C calc'!A0" from a results file is text, not a formula; numbers, negative ones
// included, stay numbers). It is written cell by cell into one buffer: an export has a
// line for each of a run's cases, 128,000 at the largest sweep, and the Writer took a
// string for every cell. A number's text needs neither quotes nor a ' (it parses as a
// number), so numbers are appended as they are formatted. TestCSVLineIsWriter holds it
// to the Writer.
type csvLine struct {
	b     []byte
	cells int
}

func (l *csvLine) reset() { l.b, l.cells = l.b[:0], 0 }

func (l *csvLine) comma() {
	if l.cells > 0 {
		l.b = append(l.b, ',')
	}
	l.cells++
}

// empty is an empty cell.
func (l *csvLine) empty() { l.comma() }

// int is an integer's cell (strconv.Itoa).
func (l *csvLine) int(i int) {
	l.comma()
	l.b = strconv.AppendInt(l.b, int64(i), 10)
}

// float is x's cell, to digits significant digits (-1: as few as read back exactly;
// strconv.FormatFloat's 'g').
func (l *csvLine) float(x float64, digits int) {
	l.comma()
	l.b = strconv.AppendFloat(l.b, x, 'g', digits, 64)
}

// text is a cell of text: marked with a leading ' when a spreadsheet would run it, then
// quoted as the Writer quotes it.
func (l *csvLine) text(s string) {
	l.comma()
	mark := s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 && !isNumber(s)
	if !needsQuotes(s, mark) {
		if mark {
			l.b = append(l.b, '\'')
		}
		l.b = append(l.b, s...)
		return
	}
	l.b = append(l.b, '"')
	if mark {
		l.b = append(l.b, '\'')
	}
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			break
		}
		l.b = append(append(l.b, s[:i+1]...), '"')
		s = s[i+1:]
	}
	l.b = append(append(l.b, s...), '"')
}

// isNumber is whether s parses as a number (strconv.ParseFloat).
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// needsQuotes is the Writer's fieldNeedsQuotes for s, with a leading ' when marked.
func needsQuotes(s string, marked bool) bool {
	if strings.ContainsAny(s, ",\"\r\n") {
		return true
	}
	if marked || s == "" {
		return false // a cell that starts with ' is quoted only for what is in it
	}
	if s == `\.` {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(r)
}

// row is a row's cells, in columns' order, then its metrics' in metrics' order.
func (l *csvLine) row(r *results.Row, metrics []string) {
	l.text(r.Key())
	l.text(r.Shard)
	l.int(r.Attempt)
	l.text(r.RunID)
	l.text(r.SourceSHA)
	l.text(r.StartedAt)
	l.text(r.Host)
	l.text(r.Testlist)
	l.text(r.OpType)
	l.text(r.ArgsJSON())
	l.text(r.ArgsLabel)
	l.text(r.Backend)
	l.text(r.Cluster)
	l.text(r.Runner)
	l.int(r.WorldSize)
	l.text(r.Status)
	l.text(r.Message)
	l.int(r.Tries)
	if r.GPUSeconds == 0 {
		l.empty()
	} else {
		l.float(r.GPUSeconds, 6)
	}
	l.text(r.Throttled)
	l.text(r.Contended)
	l.judged(r)
	if r.Counters == nil { // a timing row: why it has no counters, if it says
		for range len(counterColumns) - 1 {
			l.empty()
		}
		l.text(r.CounterProblem)
	} else {
		for _, c := range counted(r) {
			l.text(c)
		}
	}
	for _, m := range metrics {
		if v, ok := r.Metrics[m]; ok {
			l.float(v, -1)
		} else {
			l.empty()
		}
	}
}

// judged is a row's place against its hardware's limits, as solColumns name it: empty
// cells when it is not placed.
func (l *csvLine) judged(r *results.Row) {
	w, j, ok := r.SOL()
	if !ok {
		for range solColumns {
			l.empty()
		}
		return
	}
	for _, x := range []float64{w.FLOPs, w.Bytes, j.TFLOPS, j.TBPS, j.PctCompute, j.PctBandwidth, j.Intensity} {
		l.float(x, 6)
	}
	l.text(j.Bound)
	l.float(j.SOL, 6)
	l.text(strconv.FormatBool(j.Impossible))
	l.text(w.Source)
	if w.Source == "harness" && w.FormulaDiff != 0 {
		l.float(w.FormulaDiff, 6)
	} else {
		l.empty()
	}
}
