package counters

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/semianalysis/opx/internal/files"
)

// readCSV reads a CSV file with a header row into maps by column name.
// It is read as every file from a run is (files.ReadRegular): a FIFO or a device in its
// place is an error, not a read that never ends.
func readCSV(ctx context.Context, path string) ([]map[string]string, error) {
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: no header: %w", path, err)
	}
	var out []map[string]string
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(rec) != len(header) {
			continue
		}
		m := make(map[string]string, len(header))
		for i, h := range header {
			m[strings.TrimSpace(h)] = rec[i]
		}
		out = append(out, m)
	}
}

// rocPass is one rocprofv3 pass directory's files.
type rocPass struct {
	counters, kernels, markers []string
}

// findPasses lists every directory under root that holds rocprofv3 CSVs (one per --pmc
// pass: <root>/<pass>/[<host>/<pid>/]<name>_counter_collection.csv, _kernel_trace.csv,
// _marker_api_trace.csv), by directory.
func findPasses(root string) (map[string]*rocPass, error) {
	passes := map[string]*rocPass{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		dir, name := filepath.Dir(path), d.Name()
		if strings.HasPrefix(name, "rank") && !strings.HasPrefix(name, "rank0_") {
			return nil // another rank's: rank 0 writes the results file the indexes name
		}
		switch {
		case strings.HasSuffix(name, "_counter_collection.csv"):
			p := rocPassOf(passes, dir)
			p.counters = append(p.counters, path)
		case strings.HasSuffix(name, "_kernel_trace.csv"):
			p := rocPassOf(passes, dir)
			p.kernels = append(p.kernels, path)
		case strings.HasSuffix(name, "_marker_api_trace.csv"):
			p := rocPassOf(passes, dir)
			p.markers = append(p.markers, path)
		}
		return nil
	})
	return passes, err
}

func rocPassOf(passes map[string]*rocPass, dir string) *rocPass {
	if passes[dir] == nil {
		passes[dir] = &rocPass{}
	}
	return passes[dir]
}

// span is a marker range: its op index and start.
type span struct {
	index      int
	start, end float64
}

// caseAcc is one case's counters over the passes.
type caseAcc struct {
	counters map[string]float64
	timeNS   []float64          // per dispatch, from the first pass that traced the case
	weights  map[string]float64 // counter × dispatch time, for the % counters
	weightT  map[string]float64 // the dispatch time those were weighted by
}

// rocReader gathers every pass of one rocprofv3 run.
type rocReader struct {
	ctx   context.Context
	res   *Result
	cases map[int]*caseAcc
}

func (rr *rocReader) acc(i int) *caseAcc {
	if rr.cases[i] == nil {
		rr.cases[i] = &caseAcc{counters: map[string]float64{}, weights: map[string]float64{}, weightT: map[string]float64{}}
	}
	return rr.cases[i]
}

func (rr *rocReader) problem(err error) { rr.res.Problems = append(rr.res.Problems, err.Error()) }

// rows reads every file of a kind in a pass, saying which could not be read.
func (rr *rocReader) rows(files []string) []map[string]string {
	var out []map[string]string
	for _, f := range files {
		rows, err := readCSV(rr.ctx, f)
		if err != nil {
			rr.problem(err)
			continue
		}
		out = append(out, rows...)
	}
	return out
}

// ReadRocprof reads every rocprofv3 pass under root. In each pass a dispatch belongs to
// the opx<index> range (marker trace, roctxRangePush) it started in — from the range's
// start to the next range's; its counters (counter collection, by Dispatch_Id) are summed
// per case over the passes, its time taken from the first pass's kernel trace.
func ReadRocprof(ctx context.Context, root string, res *Result) error {
	passes, err := findPasses(root)
	if err != nil {
		return err
	}
	dirs := make([]string, 0, len(passes))
	for d := range passes {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	rr := &rocReader{ctx: ctx, res: res, cases: map[int]*caseAcc{}}
	for n, d := range dirs {
		p := passes[d]
		if len(p.markers) == 0 || len(p.kernels) == 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: a pass without its marker or kernel trace: its counters are not joined", d))
			continue
		}
		rr.pass(p, n == 0)
	}
	for i, c := range rr.cases {
		res.Cases[i] = c.vocabulary()
	}
	return nil
}

// pass joins one pass's dispatches to their ranges and adds their counters; the first
// pass also gives the cases' kernel times and counts the dispatches outside any range.
func (rr *rocReader) pass(p *rocPass, first bool) {
	var spans []span
	for _, r := range rr.rows(p.markers) {
		if i := rangeIndex(r["Function"]); i >= 0 {
			start, ok1 := number(r["Start_Timestamp"])
			end, ok2 := number(r["End_Timestamp"])
			if ok1 && ok2 {
				spans = append(spans, span{i, start, end})
			}
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	// a dispatch belongs to the range whose start and end contain its start (the
	// innermost: the latest to start); one that starts between ranges belongs to none
	which := func(t float64) int {
		for k := sort.Search(len(spans), func(j int) bool { return spans[j].start > t }) - 1; k >= 0; k-- {
			if t <= spans[k].end {
				return spans[k].index
			}
		}
		return -1
	}
	dispatchCase, dispatchTime := map[string]int{}, map[string]float64{}
	for _, r := range rr.rows(p.kernels) {
		start, ok1 := number(r["Start_Timestamp"])
		end, ok2 := number(r["End_Timestamp"])
		if !ok1 || !ok2 {
			continue
		}
		i, id := which(start), dispatchID(r)
		dispatchCase[id], dispatchTime[id] = i, end-start
		switch {
		case i < 0 && first:
			rr.res.Unranged++
		case i >= 0 && first:
			c := rr.acc(i)
			c.timeNS = append(c.timeNS, end-start)
		case i >= 0:
			rr.acc(i) // a case the first pass did not trace still gets its counters
		}
	}
	for _, r := range rr.rows(p.counters) {
		i, ok := dispatchCase[dispatchID(r)]
		v, okV := number(r["Counter_Value"])
		if !ok || i < 0 || !okV {
			continue
		}
		c, name, t := rr.acc(i), r["Counter_Name"], dispatchTime[dispatchID(r)]
		c.counters[name] += v
		c.weights[name] += v * t
		c.weightT[name] += t
	}
}

// dispatchID is what names a dispatch in a rocprofv3 trace: its Dispatch_Id, or — in the
// early column set (ROCm 6.0–6.1: Kind, Agent_Id, Queue_Id, Kernel_Id, Kernel_Name,
// Correlation_Id, …), which has none — its Correlation_Id.
func dispatchID(r map[string]string) string {
	if id := r["Dispatch_Id"]; id != "" {
		return id
	}
	return "correlation " + r["Correlation_Id"]
}

// vocabulary maps a case's rocprofv3 counters to the vocabulary: FETCH_SIZE and
// WRITE_SIZE (kilobytes) as DRAM bytes, TCC hits of TCC lookups as the L2 hit rate,
// MfmaUtil and GPU_UTIL weighted by dispatch time.
func (c *caseAcc) vocabulary() *Case {
	k := kernel{tensorPct: math.NaN(), busyPct: math.NaN()}
	for _, t := range c.timeNS {
		k.timeNS += t
	}
	k.hasTime = len(c.timeNS) > 0
	if v, ok := c.counters["FETCH_SIZE"]; ok {
		k.read, k.hasRead = v*1024, true
	}
	if v, ok := c.counters["WRITE_SIZE"]; ok {
		k.write, k.hasWrite = v*1024, true
	}
	hit, okH := c.counters["TCC_HIT_sum"]
	miss, okM := c.counters["TCC_MISS_sum"]
	if okH && okM && hit+miss > 0 {
		k.l2Hit, k.l2Lookups, k.hasL2 = hit, hit+miss, true
	}
	if t := c.weightT["MfmaUtil"]; t > 0 {
		k.tensorPct = c.weights["MfmaUtil"] / t
	}
	if t := c.weightT["GPU_UTIL"]; t > 0 {
		k.busyPct = c.weights["GPU_UTIL"] / t
	}
	cs := combine("rocprofv3", []kernel{k})
	cs.Kernels = len(c.timeNS)
	return cs
}
