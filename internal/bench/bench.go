// Package bench is opx's built-in cpu backend (`opx bench`): fp32/fp64 GEMMs timed on the host CPU,
// so a sweep runs end to end on a machine with no GPU.
//
// It is opx's built-in cpu backend (`opx bench`): it implements the benchmark
// harness contract (docs/compat-spec.md §8.1, §12.9) for GEMMs on the host CPU with gonum, so a sweep
// can run end to end on a machine with no GPU. Rank 0 checkpoints the results file
// atomically after every op.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/recipes"
	"github.com/semianalysis/opx/internal/version"
)

// Options are the harness flags.
type Options struct {
	Strict                  bool
	TestlistDir, ResultsDir string
	Testlists               []string // "" = OPERATORX_TESTLISTS, else all
	Getenv                  func(string) string
	Environ                 []string
	Now                     func() time.Time
}

// Summary is what a run produced.
type Summary struct {
	OK, Unsupported, Error int
	Path                   string
}

// Run benchmarks the selected shapes and returns the counts; strict mode makes an error
// row an error.
func Run(ctx context.Context, o Options, progress func(i, n int, desc string)) (Summary, error) {
	jobs, err := selectJobs(o)
	if err != nil {
		return Summary{}, err
	}
	out, err := newResults(o)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Path: out.path}
	earlier, err := earlierRounds(ctx, jobs, o.Getenv) // rows are written in the last round
	if err != nil {
		return sum, err
	}
	var lastWrite time.Time
	for i, j := range jobs {
		if err := ctx.Err(); err != nil {
			return sum, context.Cause(ctx)
		}
		typ, _ := j.shape.String("type")
		args, _ := j.shape.Object("args")
		if progress != nil {
			progress(i, len(jobs), describe(typ, args))
		}
		status := out.add(j, o.Getenv, earlier[i])
		switch status {
		case "ok":
			sum.OK++
		case "unsupported":
			sum.Unsupported++
		default:
			sum.Error++
		}
		// checkpoint after every measured op (ok or error: what took time to learn); a run
		// of unsupported rows, which cost nothing to redo, is checkpointed at most every
		// checkpointEvery (the catalog's 7,212-shape gemm_legacy rewrote a growing file
		// 7,212 times: 86 s of JSON for nothing measured)
		if o.Strict && (status != "unsupported" || time.Since(lastWrite) >= checkpointEvery) {
			if err := out.write(); err != nil {
				return sum, err
			}
			lastWrite = time.Now()
		}
	}
	if len(out.rows) > 0 {
		if err := out.write(); err != nil {
			return sum, err
		}
	}
	// strict: an error row fails the harness. A selection with nothing the CPU can compute
	// (bf16, fp8, MoE, attention: all unsupported rows, each with its reason) is not a
	// harness failure; summarize still reports a shard with no ok row as failed.
	if o.Strict && sum.Error > 0 {
		return sum, fmt.Errorf("strict: %d ok, %d unsupported, %d error row(s)", sum.OK, sum.Unsupported, sum.Error)
	}
	return sum, nil
}

// job is one shape to run.
type job struct {
	list  string
	shape *pyjson.Object
}

// selectJobs is the shapes of the selected testlists (--testlists, else
// OPERATORX_TESTLISTS, else all) whose split is this process's OPERATORX_PARALLEL, after
// checking that the split matches the ranks launched.
func selectJobs(o Options) ([]job, error) {
	getenv := o.Getenv
	names := o.Testlists
	if len(names) == 0 {
		if v := getenv("OPERATORX_TESTLISTS"); v != "" {
			names = strings.Split(v, ",")
		}
	}
	tls := catalog.NewTestlists(o.TestlistDir)
	if len(names) == 0 {
		names = tls.Names()
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(tls.Names(), n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown testlist(s): [%s]; available: [%s]", strings.Join(unknown, ", "), strings.Join(tls.Names(), ", "))
	}
	// the process's split: OPERATORX_PARALLEL (default none: world size 1)
	split := recipes.Normalize(nil)
	if p := getenv("OPERATORX_PARALLEL"); p != "" && p != "null" {
		v, err := pyjson.Parse([]byte(p))
		if err != nil {
			return nil, fmt.Errorf("OPERATORX_PARALLEL: %w", err)
		}
		if po, ok := v.(*pyjson.Object); ok {
			split = recipes.Normalize(po)
		}
	}
	splitKey := string(pyjson.MustMarshal(split, pyjson.Identity))
	ws := atoi(getenv("WORLD_SIZE"), 1)
	tp, _ := split.Get("tp")
	dp, _ := split.Get("dp")
	if need := asInt(tp) * asInt(dp); need != ws {
		return nil, fmt.Errorf("OPERATORX_PARALLEL=%s needs %d ranks, launched %d", getenv("OPERATORX_PARALLEL"), need, ws)
	}
	var jobs []job
	for _, n := range names {
		shapes, err := tls.Load(n)
		if err != nil {
			return nil, err
		}
		for i, s := range shapes {
			so := s.(*pyjson.Object)
			if err := checkSources(n, i, so); err != nil {
				return nil, err
			}
			args, _ := so.Object("args")
			par, _ := args.Object("parallel")
			if string(pyjson.MustMarshal(recipes.Normalize(par), pyjson.Identity)) == splitKey {
				jobs = append(jobs, job{n, so})
			}
		}
	}
	return jobs, nil
}

// results is the results document rank 0 writes: the run's provenance and its rows.
type results struct {
	path string
	run  *pyjson.Object
	rows []pyjson.Value
	now  func() time.Time
	rank int64
	dir  string
}

// newResults starts the results document: <results-dir>/cpu/<cluster>/<run id>.json.
func newResults(o Options) (*results, error) {
	getenv := o.Getenv
	now := o.Now
	if now == nil {
		now = time.Now
	}
	cluster := getenv("OPERATORX_CLUSTER")
	if cluster != "" && !files.SafeName(cluster) {
		// it names the results directory: a cluster of "../.." would write outside it
		return nil, fmt.Errorf("OPERATORX_CLUSTER=%s is not a plain name (letters, digits, '.', '_', '-')", pytext.Repr(cluster))
	}
	started := now().UTC()
	rid := make([]byte, 3)
	rand.Read(rid)
	clusterName := cluster
	if clusterName == "" {
		clusterName = "unknown"
	}
	runID := started.Format("20060102T150405Z") + "-" + clusterName + "-" + hex.EncodeToString(rid)[:5]
	host, _ := os.Hostname()
	envObj := pyjson.NewObject()
	for _, kv := range o.Environ {
		k, v, _ := strings.Cut(kv, "=")
		if keepEnv(k) {
			envObj.Set(k, v)
		}
	}
	sortObject(envObj)
	runObj := pyjson.Obj("id", runID, "started_at", started.Format("2006-01-02T15:04:05Z"), "finished_at", nil,
		"cluster", nilIfEmpty(cluster), "operatorx_version", version.Version, "operatorx_git_sha", nilIfEmpty(version.Commit),
		"hostname", host, "instance_type", nil,
		"software", pyjson.Obj("go", runtime.Version(), "gonum", "v0.17.0", "backend", "cpu"),
		"container_image", nilIfEmpty(getenv("OPERATORX_CONTAINER_IMAGE")), "env", envObj)
	return &results{path: filepath.Join(o.ResultsDir, "cpu", clusterName, runID+".json"), run: runObj, now: now,
		rank: atoi(getenv("RANK"), 0), dir: o.ResultsDir}, nil
}

// add runs one job and appends its row; it returns the row's status.
func (r *results) add(j job, getenv func(string) string, earlier [][]float64) string {
	typ, _ := j.shape.String("type")
	args, _ := j.shape.Object("args")
	sources, _ := j.shape.Get("sources")
	if sources == nil {
		sources = []pyjson.Value{}
	}
	row := pyjson.Obj("op", pyjson.Obj("type", typ, "args", args, "backend", "cpu", "sources", sources))
	metrics, status, msg := runOne(typ, args, getenv, earlier)
	row.Set("metrics", metrics)
	row.Set("status", status)
	if status != "ok" {
		row.Set("message", msg)
	}
	row.Set("testlist", j.list)
	r.rows = append(r.rows, row)
	return status
}

// write rewrites the document, atomically (rank 0 only).
func (r *results) write() error {
	if r.rank != 0 || r.dir == "" {
		return nil
	}
	r.run.Set("finished_at", r.now().UTC().Format("2006-01-02T15:04:05Z"))
	doc := pyjson.Obj("schema_version", "1", "run", r.run, "rows", r.rows)
	data, err := pyjson.Marshal(doc, pyjson.Default)
	if err == nil {
		err = files.WriteAtomic(r.path, data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", r.path, err)
	}
	return nil
}

// compiled on first use: every opx process pays for a package-level regexp at start-up
var sourceRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^/\s]+/[^/\s]+(/[^/\s]+)?$`) })

// checkSources checks a testlist entry's "sources" (docs/compat-spec.md §8.1): when present, a list
// of '<org>/<model>/<role>' strings. Beyond the seed's harness, which refuses them, the
// cpu backend also takes the reference catalog's other entries: a "name", no "sources",
// and sources without a role ('<org>/<model>'), so every testlist opx ships runs.
func checkSources(list string, i int, shape *pyjson.Object) error {
	v, ok := shape.Get("sources")
	if !ok {
		return nil
	}
	bad := fmt.Errorf("%s[%d]: 'sources' must be a list of '<org>/<model>[/<role>]' strings (empty for a shape from no model)", list, i)
	srcs, isList := v.([]pyjson.Value)
	if !isList {
		return bad
	}
	for _, x := range srcs {
		if str, ok := x.(string); !ok || !sourceRe().MatchString(str) {
			return bad
		}
	}
	return nil
}

func describe(typ string, args *pyjson.Object) string {
	m, _ := args.Get("m")
	n, _ := args.Get("n")
	k, _ := args.Get("k")
	return fmt.Sprintf("%s m=%v n=%v k=%v", typ, m, n, k)
}

var envNames = map[string]bool{"WORLD_SIZE": true, "RANK": true, "LOCAL_RANK": true, "MASTER_ADDR": true, "MASTER_PORT": true,
	"CUDA_VISIBLE_DEVICES": true, "ROCR_VISIBLE_DEVICES": true, "HIP_VISIBLE_DEVICES": true, "SLURM_JOB_ID": true, "SLURM_NODELIST": true}

func keepEnv(k string) bool {
	if envNames[k] {
		return true
	}
	for _, p := range []string{"NCCL_", "RCCL_", "NEURON_", "XLA_", "JAX_", "TPU_", "PYTORCH_", "OPERATORX_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func sortObject(o *pyjson.Object) {
	keys := o.Keys()
	sort.Strings(keys)
	c := o.Clone()
	for _, k := range keys {
		o.Delete(k)
	}
	for _, k := range keys {
		v, _ := c.Get(k)
		o.Set(k, v)
	}
}

func nilIfEmpty(s string) pyjson.Value {
	if s == "" {
		return nil
	}
	return s
}

func atoi(s string, def int64) int64 {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return def
}

func asInt(v pyjson.Value) int64 {
	if i, ok := v.(pyjson.Int); ok {
		n, _ := i.Int64()
		return n
	}
	return 0
}

// dtypeOf reads an operand's dtype in either schema the catalog uses: {"a": {"dtype":
// "fp32"}} (or "a": "fp32") and the legacy {"dtype_a": "fp32"}.
func dtypeOf(args *pyjson.Object, key string) string {
	v, ok := args.Get(key)
	if !ok {
		v, _ = args.Get("dtype_" + key)
	}
	switch x := v.(type) {
	case string:
		return x
	case *pyjson.Object:
		s, _ := x.String("dtype")
		return s
	}
	return ""
}

// checkpointEvery is how often a run of unsupported rows is checkpointed.
const checkpointEvery = 500 * time.Millisecond

// MaxFLOP bounds one case of the cpu backend (2mnk): a 2048³ GEMM (17 GFLOP) takes a few
// seconds on two cores; the catalog's 8192³ shapes (1.1 TFLOP) would take minutes each.
const MaxFLOP = 20e9

// gemm is one runnable shape: its timed step and the check of its first result.
type gemm struct {
	m, n, k int64
	step    func()
	check   func() error
}

// prepare is a shape the cpu backend can run, or the status and message of one it cannot.
func prepare(typ string, args *pyjson.Object) (*gemm, string, string) {
	if typ != "gemm" {
		return nil, "unsupported", fmt.Sprintf("cpu/cpu has no implementation for %s", typ)
	}
	da, db, dout := dtypeOf(args, "a"), dtypeOf(args, "b"), dtypeOf(args, "out")
	if da != db || (dout != "" && dout != da) || (da != "fp32" && da != "fp64") {
		return nil, "unsupported", fmt.Sprintf("cpu gemm supports fp32 and fp64 operands of one dtype; got a=%s b=%s out=%s", da, db, dout)
	}
	m, n, k := asInt(get(args, "m")), asInt(get(args, "n")), asInt(get(args, "k"))
	if m <= 0 || n <= 0 || k <= 0 {
		return nil, "error", fmt.Sprintf("ValueError: gemm needs positive integer m, n and k; got m=%v n=%v k=%v", get(args, "m"), get(args, "n"), get(args, "k"))
	}
	if m*n+n*k+m*k > 1<<28 {
		return nil, "unsupported", fmt.Sprintf("cpu gemm m=%d n=%d k=%d needs more than 2 GiB of operands", m, n, k)
	}
	if flops := 2 * float64(m) * float64(n) * float64(k); flops > MaxFLOP {
		return nil, "unsupported", fmt.Sprintf("cpu gemm m=%d n=%d k=%d is %.0f GFLOP, over the cpu backend's %.0f GFLOP per case", m, n, k, flops/1e9, MaxFLOP/1e9)
	}
	g := &gemm{m: m, n: n, k: k}
	if da == "fp64" {
		a, b, c := gen64(m, k, 1), gen64(k, n, 2), blas64.General{Rows: int(m), Cols: int(n), Stride: int(n), Data: make([]float64, m*n)}
		g.step = func() { blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 0, c) }
		g.check = func() error {
			return verify(m, n, k, func(i, j int) float64 { return c.Data[i*int(n)+j] }, a.Data, b.Data, 1e-9)
		}
		return g, "ok", ""
	}
	a, b, c := gen32(m, k, 1), gen32(k, n, 2), blas32.General{Rows: int(m), Cols: int(n), Stride: int(n), Data: make([]float32, m*n)}
	g.step = func() { blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 0, c) }
	g.check = func() error {
		a64, b64 := make([]float64, len(a.Data)), make([]float64, len(b.Data))
		for i, v := range a.Data {
			a64[i] = float64(v)
		}
		for i, v := range b.Data {
			b64[i] = float64(v)
		}
		return verify(m, n, k, func(i, j int) float64 { return float64(c.Data[i*int(n)+j]) }, a64, b64, 1e-3)
	}
	return g, "ok", ""
}

// measure warms the step up and times it for its share of the case's budget: all of it,
// or 1/OPERATORX_ROUNDS of it when the shapes are timed in rounds.
func (g *gemm) measure(getenv func(string) string) []float64 {
	step := g.step
	// OPERATORX_CPU_REPEAT=n times n GEMMs as one: a slowdown made on purpose, to check that
	// a regression gate catches it (compare's tests do)
	if n := int(floatEnv(getenv, "OPERATORX_CPU_REPEAT", 1)); n > 1 {
		step = func() {
			for range n {
				g.step()
			}
		}
	}
	warm := floatEnv(getenv, "OPERATORX_WARMUP_MIN_S", 0.025)
	deadline := time.Now().Add(time.Duration(warm * float64(time.Second)))
	for time.Now().Before(deadline) {
		step()
	}
	budget := floatEnv(getenv, "OPERATORX_MEASURE_S", 0.2) / float64(rounds(getenv)) // how long each case is timed
	return Measure(step, time.Duration(budget*float64(time.Second)), 3, 1000)
}

// rounds is OPERATORX_ROUNDS: in how many passes over the shapes each is timed (default
// 1). Timing a shape at several moments of the run, its spread covers what a busy or
// shared machine does between moments, not only within one.
func rounds(getenv func(string) string) int {
	return max(1, int(floatEnv(getenv, "OPERATORX_ROUNDS", 1)))
}

// runOne measures one shape — its samples joined to those of earlier rounds — and returns
// its metrics, status and message.
func runOne(typ string, args *pyjson.Object, getenv func(string) string, earlier [][]float64) (*pyjson.Object, string, string) {
	empty := pyjson.NewObject()
	g, status, msg := prepare(typ, args)
	if g == nil {
		return empty, status, msg
	}
	g.step()
	if err := g.check(); err != nil {
		return empty, "error", "AssertionError: " + err.Error()
	}
	all := append(earlier, g.measure(getenv))
	var samples, medians []float64
	for _, r := range all {
		samples = append(samples, r...)
		medians = append(medians, median(r))
	}
	med := median(samples)
	flops := 2 * float64(g.m) * float64(g.n) * float64(g.k)
	metrics := pyjson.Obj("latency_us", med, "latency_min_us", slices.Min(samples), "latency_max_us", slices.Max(samples),
		"latency_p25_us", quartile(samples, 0.25), "latency_p75_us", quartile(samples, 0.75))
	if len(all) > 1 {
		// timed in rounds: the range of the rounds' medians is how far the case moves
		// with the moment of the run it is timed in
		metrics.Set("latency_lo_us", slices.Min(medians))
		metrics.Set("latency_hi_us", slices.Max(medians))
		metrics.Set("rounds", pyjson.NewInt(int64(len(all))))
	}
	metrics.Set("iterations", pyjson.NewInt(int64(len(samples))))
	metrics.Set("gflops", flops/(med*1e3))
	metrics.Set("threads", pyjson.NewInt(int64(runtime.GOMAXPROCS(0))))
	return metrics, "ok", ""
}

// median of samples (sorted in place).
func median(samples []float64) float64 {
	sort.Float64s(samples)
	n := len(samples)
	if n%2 == 1 {
		return samples[n/2]
	}
	return (samples[n/2-1] + samples[n/2]) / 2
}

// earlierRounds times every runnable shape in all rounds but the last, in turn.
func earlierRounds(ctx context.Context, jobs []job, getenv func(string) string) ([][][]float64, error) {
	out := make([][][]float64, len(jobs))
	for r := 1; r < rounds(getenv); r++ {
		for i, j := range jobs {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx)
			}
			typ, _ := j.shape.String("type")
			args, _ := j.shape.Object("args")
			if g, _, _ := prepare(typ, args); g != nil {
				out[i] = append(out[i], g.measure(getenv))
			}
		}
	}
	return out, nil
}

// Measure times f until budget is spent (at least min, at most max runs), in microseconds.
func Measure(f func(), budget time.Duration, minRuns, maxRuns int) []float64 {
	var out []float64
	start := time.Now()
	for len(out) < maxRuns && (len(out) < minRuns || time.Since(start) < budget) {
		t := time.Now()
		f()
		out = append(out, float64(time.Since(t).Nanoseconds())/1e3)
	}
	return out
}

func get(o *pyjson.Object, k string) pyjson.Value { v, _ := o.Get(k); return v }

func floatEnv(getenv func(string) string, k string, def float64) float64 {
	if v, err := strconv.ParseFloat(getenv(k), 64); err == nil {
		return v
	}
	return def
}

func gen64(r, c, seed int64) blas64.General {
	d := make([]float64, r*c)
	for i := range d {
		d[i] = float64((int64(i)*7+seed*13)%17-8) / 8
	}
	return blas64.General{Rows: int(r), Cols: int(c), Stride: int(c), Data: d}
}

func gen32(r, c, seed int64) blas32.General {
	d := make([]float32, r*c)
	for i := range d {
		d[i] = float32((int64(i)*7+seed*13)%17-8) / 8
	}
	return blas32.General{Rows: int(r), Cols: int(c), Stride: int(c), Data: d}
}

// verify checks sampled entries of C against a plain triple loop.
func verify(m, n, k int64, c func(i, j int) float64, a, b []float64, tol float64) error {
	for s := int64(0); s < 64; s++ {
		i, j := int((s*7919)%m), int((s*104729)%n)
		want := 0.0
		for p := 0; p < int(k); p++ {
			want += a[i*int(k)+p] * b[p*int(n)+j]
		}
		if got := c(i, j); math.Abs(got-want) > tol*math.Max(1, math.Abs(want))*float64(k) {
			return fmt.Errorf("element C[%d][%d] = %g, reference %g", i, j, got, want)
		}
	}
	return nil
}

// quartile is the q-quantile of sorted samples, interpolated between the nearest ranks.
func quartile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}
