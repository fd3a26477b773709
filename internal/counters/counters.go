// Package counters reads counters mode's profiler output (Nsight Compute and rocprofv3 CSV) and
// joins each kernel to the case whose NVTX/roctx range it ran in.
//
// It reads what counters mode leaves in a shard's results/counters: Nsight
// Compute's CSV (ncu --csv --log-file, one file per rank) and rocprofv3's per-pass CSV
// directories (counter collection, kernel trace, marker trace). Each kernel is joined to
// its case through the `opx<index>` NVTX/ROCTX range the harness opens around op <index>
// (the index of its row in the rank's results file); a case's kernels are combined; both
// vendors are mapped to one small vocabulary (Case). The readers tolerate the formats'
// known quirks — ncu's ==PROF== lines before and among the records, a units row (raw
// page), thousands separators, column sets that differ between versions — and a file they
// cannot read fails the cases it would have joined, not the shard.
package counters

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/files"
)

// Case is one case's counters, its kernels combined. A figure no kernel reported is NaN.
type Case struct {
	Kernels      int
	KernelTimeUS float64 // the kernels' summed GPU time
	DRAMRead     float64 // bytes read from device memory
	DRAMWrite    float64 // bytes written to it
	L2HitPct     float64 // L2 hits of L2 lookups
	TensorPct    float64 // tensor pipe (NVIDIA) / MFMA (AMD) utilisation, time-weighted
	BusyPct      float64 // SM (NVIDIA) / GPU (AMD) busy, time-weighted
	Source       string  // ncu | rocprofv3
}

// Bytes is what the kernels moved to and from device memory (NaN when unknown).
func (c *Case) Bytes() float64 { return c.DRAMRead + c.DRAMWrite }

// Result is a counters directory read: the cases by op index, and what could not be
// joined or read.
type Result struct {
	Cases    map[int]*Case
	Unranged int      // kernels outside any opx<index> range
	Problems []string // files or records that could not be read, each a line
}

// rangeRE is the harness's range name: opx<index>, possibly with ncu's push/pop suffix "/".
var rangeRE = regexp.MustCompile(`^opx([0-9]+)/?$`)

// rangeIndex is the op index a range (or an ncu kernel renamed after it) names; -1 if none.
func rangeIndex(name string) int {
	m := rangeRE.FindStringSubmatch(strings.TrimSpace(name))
	if m == nil {
		return -1
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return i
}

// kernel is one kernel's figures in the vocabulary's terms, before combining.
type kernel struct {
	timeNS                   float64
	read, write              float64
	l2Hit, l2Lookups         float64 // summed sectors (NVIDIA) or requests (AMD)
	l2HitPct                 float64 // when only a rate is given
	tensorPct, busyPct       float64
	hasRead, hasWrite, hasL2 bool
	hasTime                  bool // its time was measured: an unmeasured time is unknown, never 0
}

func newCase(source string) *Case {
	return &Case{Source: source, DRAMRead: math.NaN(), DRAMWrite: math.NaN(), L2HitPct: math.NaN(), TensorPct: math.NaN(),
		BusyPct: math.NaN()}
}

// combine folds a case's kernels: sums of time and bytes, the L2 hit rate of all their
// lookups, utilisations weighted by kernel time.
func combine(source string, ks []kernel) *Case {
	c := newCase(source)
	c.Kernels = len(ks)
	var t, hit, look float64
	var l2, tensor, busy rate
	timed := false
	for _, k := range ks {
		t += k.timeNS
		timed = timed || k.hasTime
		if k.hasRead {
			c.DRAMRead = nz(c.DRAMRead) + k.read
		}
		if k.hasWrite {
			c.DRAMWrite = nz(c.DRAMWrite) + k.write
		}
		if k.l2Lookups > 0 {
			hit, look = hit+k.l2Hit, look+k.l2Lookups
		} else if k.hasL2 {
			l2.add(k.l2HitPct, k.timeNS)
		}
		if !math.IsNaN(k.tensorPct) {
			tensor.add(k.tensorPct, k.timeNS)
		}
		if !math.IsNaN(k.busyPct) {
			busy.add(k.busyPct, k.timeNS)
		}
	}
	c.KernelTimeUS = t / 1e3
	if !timed {
		c.KernelTimeUS = math.NaN() // not measured: empty in every export, never 0
	}
	switch {
	case look > 0:
		c.L2HitPct = 100 * hit / look
	case l2.n > 0:
		c.L2HitPct = l2.mean()
	}
	if tensor.n > 0 {
		c.TensorPct = tensor.mean()
	}
	if busy.n > 0 {
		c.BusyPct = busy.mean()
	}
	return c
}

// rate is a percentage over a case's kernels: weighted by each kernel's time, or — when
// the kernels report no time (a profile of rates alone) — their plain mean, never
// unknown for want of a weight.
type rate struct {
	weighted, weight, sum float64
	n                     int
}

func (r *rate) add(v, timeNS float64) {
	r.weighted, r.weight, r.sum, r.n = r.weighted+v*timeNS, r.weight+timeNS, r.sum+v, r.n+1
}

func (r *rate) mean() float64 {
	if r.weight > 0 {
		return r.weighted / r.weight
	}
	return r.sum / float64(r.n)
}

func nz(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// number reads a figure as the tools print it: thousands separators, "n/a".
func number(s string) (float64, bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	if s == "" || strings.EqualFold(s, "n/a") {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// Read reads a shard's results/counters directory: every ncu CSV in it and every
// rocprofv3 pass under it. A file that cannot be read is a problem, not an error: the
// cases it would have joined have no counters.
func Read(ctx context.Context, dir string) *Result {
	res := &Result{Cases: map[int]*Case{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			res.Problems = append(res.Problems, err.Error())
		}
		return res
	}
	rocprof := false
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			rocprof = true
		case strings.HasPrefix(e.Name(), "ncu-rank0") && strings.HasSuffix(e.Name(), ".csv"):
			// rank 0's: the rank that writes the results file, whose rows the indexes name
			b, err := files.ReadRegular(ctx, path, files.MaxInput) // never a FIFO's endless read
			if err != nil {
				res.Problems = append(res.Problems, err.Error())
				continue
			}
			if err := ReadNCU(bytes.NewReader(b), res); err != nil {
				res.Problems = append(res.Problems, path+": "+err.Error())
			}
		}
	}
	if rocprof {
		if err := ReadRocprof(ctx, dir, res); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	return res
}
