package synth

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/history/changes"
)

// Real histories: published benchmark results no one here wrote, for the figures the
// labelled scenarios cannot give (how often a real history speaks, and whether its
// siblings agree). They carry no labels: nothing is tuned to them.

// RealFile is one results file of a real history: one environment's results of one
// commit, measured together.
type RealFile struct {
	At     time.Time
	Commit string
	Env    string
	Points []RealPoint
}

// RealPoint is one benchmark's result in a file: V (seconds) and, when recorded, its 99%
// interval.
type RealPoint struct {
	Benchmark string
	V, Lo, Hi float64
	Spread    bool
}

// ReadReal reads a real history converted by scripts/real-history-django.py (gzip): a
// header of benchmark names, then a line per results file, ordered by its time.
func ReadReal(path string) ([]RealFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var benches []string
	var out []RealFile
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.HasPrefix(t, "#") {
			continue
		}
		cols := strings.Split(t, "\t")
		if cols[0] == "benchmarks" {
			benches = cols[3:]
			continue
		}
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s", path, line, why) }
		if benches == nil || len(cols) != 3+len(benches) {
			return nil, bad(fmt.Sprintf("%d columns, the header names %d benchmarks", len(cols), len(benches)))
		}
		ms, err := strconv.ParseInt(cols[0], 10, 64)
		if err != nil {
			return nil, bad("the time " + strconv.Quote(cols[0]) + " is not milliseconds")
		}
		rf := RealFile{At: time.UnixMilli(ms).UTC(), Commit: cols[1], Env: cols[2]}
		for i, c := range cols[3:] {
			if c == "" {
				continue
			}
			var x [3]float64
			parts := strings.Split(c, ",")
			if len(parts) != 1 && len(parts) != 3 {
				return nil, bad(benches[i] + ": " + strconv.Quote(c) + " is neither a value nor a value and its interval")
			}
			for j, p := range parts {
				if x[j], err = strconv.ParseFloat(p, 64); err != nil || !(x[j] > 0) || math.IsInf(x[j], 0) {
					return nil, bad(benches[i] + ": " + strconv.Quote(c) + " is not positive numbers")
				}
			}
			p := RealPoint{Benchmark: benches[i], V: x[0]}
			if len(parts) == 3 {
				p.Lo, p.Hi, p.Spread = x[0]*x[1], x[0]*x[2], true
			}
			rf.Points = append(rf.Points, p)
		}
		out = append(out, rf)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	slices.SortStableFunc(out, func(a, b RealFile) int { return a.At.Compare(b.At) })
	return out, nil
}

// RealKey names one series of a real history: a benchmark in one environment.
type RealKey struct{ Env, Benchmark string }

// RealSeries are the history's series, each in the order its files were measured, with
// the index of each point's file.
func RealSeries(files []RealFile) (map[RealKey][]changes.Obs, map[RealKey][]int) {
	obs := map[RealKey][]changes.Obs{}
	at := map[RealKey][]int{}
	for i, f := range files {
		for _, p := range f.Points {
			k := RealKey{f.Env, p.Benchmark}
			obs[k] = append(obs[k], changes.Obs{V: p.V, Lo: p.Lo, Hi: p.Hi, Spread: p.Spread})
			at[k] = append(at[k], i)
		}
	}
	return obs, at
}
