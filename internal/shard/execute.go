package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/files"
	imagepkg "github.com/semianalysis/opx/internal/image"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/safe"
)

// Options are execute's flags and surroundings.
type Options struct {
	Shard, RunID, Attempt, SourceSHA, RunnerName string
	TimeMinutes, CleanupSeconds                  int
	Manifest, Output                             string
	Registry                                     *platform.Registry
	BinaryFor                                    func(imagePlatform string) (string, error) // the opx binary to stage
	HarnessDir                                   string                                     // harness sources staged as source/ ("" = none)
	Getenv                                       func(string) string
	Environ                                      []string
	Stdout, Stderr                               io.Writer
	Slurm                                        *Slurm
	HTTPClient                                   *http.Client // model configs (nil: default)
	// DryRun prints each step's command line and environment changes and touches
	// neither Slurm nor storage.
	DryRun bool
	// AB, when set, measures the shard as a paired A/B (ab.go): both sides in rounds on
	// the one allocation, ab.json written beside the results.
	AB *AB
}

// SafeID reports whether v is what run ids, attempts, shard ids and cluster names must look
// like before they become parts of paths (files.SafeName).
func SafeID(v string) bool { return files.SafeName(v) }

// CheckTime checks a shard's time limit (--time-minutes) before anything runs: a positive
// number of minutes (Slurm reads --time=0 as no limit at all), and on a cluster long enough
// for the benchmark's own timeout (at least 300 s: BenchmarkLimit) and 300 s more for
// the image import and cleanup.
func CheckTime(minutes int, local bool) error {
	if minutes <= 0 {
		return fmt.Errorf("--time-minutes %d: give a positive number of minutes (salloc reads 0 as no limit)", minutes)
	}
	if !local && minutes*60 < BenchmarkLimit(minutes)+300 {
		return fmt.Errorf("--time-minutes %d: an allocation of %d s cannot hold the benchmark's own timeout (%d s) and 300 s for the image import and cleanup: give 10 or more",
			minutes, minutes*60, BenchmarkLimit(minutes))
	}
	return nil
}

// BenchmarkLimit is the benchmark step's timeout, in seconds, in an allocation of minutes:
// the allocation less 300 s for the rest, and never under 300 s (the seed's rule).
func BenchmarkLimit(minutes int) int { return max(300, minutes*60-300) }

func checkID(what, v string) error {
	if !SafeID(v) {
		return fmt.Errorf("invalid %s %s: use letters, digits, '.', '_' and '-'", what, pytext.Repr(v))
	}
	return nil
}

// Execute runs one shard (docs/compat-spec.md §6). It returns the process exit code's cause: nil on
// success; the finalize error when cleanup failed (status.json is then not written).
// prepare checks everything that can be known before anything is made; a dry run prints
// the steps prepare planned, execute performs the same steps.
func Execute(ctx context.Context, o Options) error {
	r, err := prepare(ctx, o)
	if err != nil {
		return err
	}
	if o.DryRun {
		return r.dryRun()
	}
	return r.perform(ctx)
}

// execution is one shard's execution, as prepare planned it.
type execution struct {
	o                 Options
	root, stage, base string
	cell              *manifest.Cell
	entry             *platform.Entry
	runner            platform.Runner
	ws                int64
	binary            string               // the opx binary to stage
	token             string               // the allocation's tag (--comment)
	benchEnd          time.Time            // when the benchmark step returned
	allocated         bool                 // salloc returned and allocation.log names the one job
	noJob             bool                 // no job can exist: the controller was unreachable, or salloc gave up before any
	phase             string               // the step running (or that failed): stage, allocation, import, ncu, benchmark
	acct              *manifest.Accounting // accounting.json, rewritten at every event
	acctFailed        bool                 // a write of it failed (said once)
}

// prepare turns the options, the manifest and the platform entry into the shard's plan,
// checking on the way every input that can be known wrong before anything is created or
// allocated. It reads, and creates nothing.
func prepare(ctx context.Context, o Options) (*execution, error) {
	for _, c := range []struct{ what, v string }{{"run id", o.RunID}, {"attempt", o.Attempt}, {"shard id", o.Shard}} {
		if err := checkID(c.what, c.v); err != nil {
			return nil, err
		}
	}
	root, err := outputRoot(o.Output)
	if err != nil {
		return nil, err
	}
	cell, err := loadCell(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := CheckTime(o.TimeMinutes, cell.Runner == platform.Local); err != nil {
		return nil, err
	}
	entry, err := checkEntry(o, cell)
	if err != nil {
		return nil, err
	}
	binary, err := o.BinaryFor(entry.ImagePlatform)
	if err != nil {
		return nil, err
	}
	if cell.Image != "" && entry.Container == "pyxis" && !manifest.ValidDigest(cell.Digest) {
		// beyond the seed: refuse before allocating, not on the node after the wait
		return nil, fmt.Errorf("shard %s in %s has no image digest for %s (digest %s); plan resolves one: plan again", o.Shard, o.Manifest, cell.Image, pytext.Repr(cell.Digest))
	}
	base, err := StageBase(entry.Storage, entry.Runner, o.Getenv)
	if err != nil {
		return nil, err
	}
	if base, err = checkBase(base, false); err != nil {
		return nil, err
	}
	if entry.Container == "pyxis" {
		if err := MountableStage(base); err != nil {
			return nil, err
		}
	}
	prefix := o.RunID + "-" + o.Attempt + "-" + o.Shard + "-"
	return &execution{o: o, root: root, stage: filepath.Join(base, prefix+"XXXXXXXX"), base: base, cell: cell,
		entry: entry, runner: entry.Runner, ws: cell.WorldSize, binary: binary,
		token: Token(o.RunID, o.Attempt, o.Shard) + "-XXXXXXXX"}, nil
}

// outputRoot is the absolute output directory, which must not exist yet.
func outputRoot(output string) (string, error) {
	root, err := filepath.Abs(output)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, filepath.Base(root))
	}
	if _, err := os.Lstat(root); err == nil {
		return "", errExists(root)
	}
	return root, nil
}

func errExists(root string) error {
	return fmt.Errorf("output directory %s already exists; each execution needs a new one", root)
}

// loadCell reads the manifest and returns the shard's cell, checked.
func loadCell(ctx context.Context, o Options) (*manifest.Cell, error) {
	m, err := manifest.Load(ctx, o.Manifest)
	if err != nil {
		return nil, err
	}
	if m.SourceSHA != o.SourceSHA || m.RunID != o.RunID {
		return nil, errors.New("manifest source/run mismatch")
	}
	cell, ok := m.Cell(o.Shard)
	if !ok {
		return nil, fmt.Errorf("shard %s is not in %s", o.Shard, o.Manifest)
	}
	if !cell.HasGPUs || !cell.HasWorldSize {
		return nil, fmt.Errorf("shard %s in %s needs integer gpus_per_node and world_size", o.Shard, o.Manifest)
	}
	return cell, nil
}

// checkEntry returns the platform entry of the cell's runner after checking the cell
// against it.
func checkEntry(o Options, cell *manifest.Cell) (*platform.Entry, error) {
	entry, ok, err := o.Registry.Lookup(cell.Runner)
	if !ok {
		return nil, fmt.Errorf("runner %s of shard %s has no platform entry", cell.Runner, o.Shard)
	}
	if err != nil {
		return nil, err
	}
	if cell.GPUsPerNode != entry.GPUsPerNode || cell.ImagePlatform != entry.ImagePlatform || cell.WorldSize > entry.GPUsPerNode {
		return nil, errors.New("manifest hardware differs from the selected runner")
	}
	if cell.WorldSize < 1 {
		return nil, fmt.Errorf("shard %s in %s has world_size %d; it must be at least 1", o.Shard, o.Manifest, cell.WorldSize)
	}
	if err := cell.Check(); err != nil {
		return nil, fmt.Errorf("shard %s in %s: %w", o.Shard, o.Manifest, err)
	}
	if _, _, err := cell.Testlists(); err != nil {
		return nil, err
	}
	return entry, nil
}

// perform carries out the plan: output directory, stage, execution.json, the steps, and
// always the cleanup.
func (r *execution) perform(ctx context.Context) (err error) {
	o := r.o
	if err := os.MkdirAll(filepath.Dir(r.root), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(r.root, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errExists(r.root)
		}
		return err
	}
	if r.base, err = checkBase(r.base, true); err != nil {
		return err
	}
	if r.token, err = NewToken(o.RunID, o.Attempt, o.Shard); err != nil {
		return err
	}
	if r.stage, err = os.MkdirTemp(r.base, o.RunID+"-"+o.Attempt+"-"+o.Shard+"-"); err != nil {
		return err
	}
	ex := &manifest.Execution{Cell: r.cell, SourceSHA: o.SourceSHA, RunID: o.RunID, Attempt: o.Attempt, Stage: r.stage, Token: r.token}
	ex.Peaks = r.entry.Peaks
	if err := ex.Write(filepath.Join(r.root, "execution.json")); err != nil {
		os.RemoveAll(r.stage)
		return err
	}
	gpus := int(r.entry.GPUsPerNode) // an exclusive node
	if r.runner.Label == platform.Local {
		gpus = int(r.ws)
	}
	now := time.Now().UTC()
	r.acct = &manifest.Accounting{Runner: r.cell.Runner, GPUs: gpus, StartedAt: &now}
	r.record(func(*manifest.Accounting) {})
	rc := 1
	defer func() {
		// finalize with a context of its own: a cancelled execute must still clean up (a
		// second signal cuts it short, keeping the evidence)
		search := !r.allocated && !r.noJob && r.runner.Label != platform.Local // look for our tag: a job may exist we were not told of
		cctx, done := proc.Cleanup(ctx)
		ferr := finalize(cctx, o.Slurm, r.root, o.CleanupSeconds, search)
		done()
		if ferr != nil {
			err = ferr
			return
		}
		wctx := context.WithoutCancel(ctx) // the record of what ran is written whatever ended it
		r.reportRelease(wctx)
		var failure *manifest.Failure
		if err != nil {
			failure = r.failure(err)
		}
		if werr := manifest.WriteStatus(filepath.Join(r.root, manifest.StatusFile), rc, AllocationIDs(wctx, r.root), failure); werr != nil && err == nil {
			err = werr
		}
	}()
	if err := r.run(ctx); err != nil {
		return err
	}
	rc = 0
	return nil
}

// record changes the accounting and rewrites accounting.json. A write that fails is said
// once and does not stop the shard: the file is the cost's record, not its measurement.
func (r *execution) record(change func(*manifest.Accounting)) {
	change(r.acct)
	if err := r.acct.Write(filepath.Join(r.root, manifest.AccountingFile)); err != nil && !r.acctFailed {
		r.acctFailed = true
		fmt.Fprintf(r.o.Stderr, "opx: warning: %v (the shard's GPU time will be missing from the ledger)\n", err)
	}
}

// failure is status.json's account of a failed execution: the phase, the error, and the
// phase's log when it has one.
func (r *execution) failure(err error) *manifest.Failure {
	f := &manifest.Failure{Phase: r.phase, Message: safe.OneLine(err.Error())}
	if fi, serr := os.Stat(filepath.Join(r.root, r.phase+".log")); serr == nil && fi.Mode().IsRegular() {
		f.Log = r.phase + ".log"
	}
	return f
}

// reportRelease says how long after the benchmark the allocation was released.
func (r *execution) reportRelease(ctx context.Context) {
	if r.benchEnd.IsZero() {
		return
	}
	if jobs := AllocationIDs(ctx, r.root); len(jobs) > 0 {
		fmt.Fprintf(r.o.Stderr, "opx: allocation %s released and stage removed %.3f s after the benchmark ended\n",
			strings.Join(jobs, ","), time.Since(r.benchEnd).Seconds())
	}
}

// command is the seed's command(): announce the phase, log the child's output, and on
// failure show the log's tail.
func (r *execution) command(ctx context.Context, argv []string, log string, env []string) error {
	r.phase = strings.TrimSuffix(log, ".log")
	fmt.Fprintf(r.o.Stdout, "[operatorx] phase=%s\n", r.phase)
	f, err := os.OpenFile(filepath.Join(r.root, log), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	phase := r.phase
	r.record(func(a *manifest.Accounting) {
		a.Begin(phase, time.Now())
		if phase == "allocation" {
			t := time.Now().UTC()
			a.SubmittedAt = &t
		}
	})
	err = proc.Run(ctx, proc.Cmd{Argv: argv, Env: env, Stdout: f, Stderr: f, Grace: 10 * time.Second})
	f.Close()
	r.record(func(a *manifest.Accounting) { a.End(phase, time.Now()) })
	if err != nil && ctx.Err() == nil {
		b, _ := os.ReadFile(filepath.Join(r.root, log))
		if len(b) > 16000 {
			b = b[len(b)-16000:]
		}
		fmt.Fprintln(r.o.Stderr, string(b))
		var ee *proc.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s step failed: %s returned non-zero exit status %d (log: %s)", strings.TrimSuffix(log, ".log"), argv[0], ee.Code, filepath.Join(r.root, log))
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// run performs the layout and then the steps on the allocation.
func (r *execution) run(ctx context.Context) error {
	r.phase = "stage"
	r.record(func(a *manifest.Accounting) { a.Begin("stage", time.Now()) })
	err := r.applyLayout(ctx)
	r.record(func(a *manifest.Accounting) { a.End("stage", time.Now()) })
	if err != nil {
		return err
	}
	if r.runner.Label == platform.Local {
		return r.runLocal(ctx)
	}
	// an allocation that cannot be made is known in seconds, not after salloc's own
	// minutes of retries: the controller is asked first
	r.phase = "allocation"
	if err := r.o.Slurm.Reachable(ctx); err != nil {
		r.noJob = true
		return fmt.Errorf("%w; nothing was allocated (check this host: opx doctor --runner %s)", err, r.runner.Label)
	}
	alloc := r.allocStep()
	if err := r.command(ctx, alloc.Argv, alloc.Log, alloc.Env); err != nil {
		if ctx.Err() == nil && len(AllocationIDs(ctx, r.root)) == 0 {
			r.noJob = true // salloc gave up by itself before any job existed: nothing to look for
		}
		return fmt.Errorf("%w (check this host: opx doctor --runner %s)", err, r.runner.Label)
	}
	jobs := AllocationIDs(ctx, r.root)
	if len(jobs) != 1 {
		return errors.New("could not identify the unique Slurm allocation")
	}
	job := jobs[0]
	r.allocated = true
	r.record(func(a *manifest.Accounting) {
		t := a.Phases[len(a.Phases)-1].End // the allocation phase's end: salloc returned
		a.GrantedAt, a.Job = t, job
	})
	ncu := ""
	var benchErr error
	ran := false // the benchmark step returned: the after fingerprint is taken
	for _, s := range r.nodeSteps(job, ncu) {
		switch s.Name {
		case "import":
			if squash, ok := r.cachedImage(ctx); ok {
				fmt.Fprintf(r.o.Stdout, "[operatorx] phase=import (cache hit: %s)\n", squash)
				continue
			}
			if err := r.command(ctx, s.Argv, s.Log, s.Env); err != nil {
				return err
			}
		case "ncu":
			r.phase = "ncu"
			r.record(func(a *manifest.Accounting) { a.Begin("ncu", time.Now()) })
			ncu = r.findNCU(ctx, s)
			r.record(func(a *manifest.Accounting) { a.End("ncu", time.Now()) })
		case "fingerprint-before":
			r.fingerprint(ctx, s)
		case "benchmark":
			if r.o.AB != nil {
				// from the grant, as Slurm counts --time: the import, the search and the
				// fingerprint came out of it
				granted := time.Now()
				if r.acct.GrantedAt != nil {
					granted = *r.acct.GrantedAt
				}
				deadline := granted.Add(time.Duration(BenchmarkLimit(r.o.TimeMinutes)) * time.Second)
				benchErr = r.abRounds(ctx, deadline, func(ctx context.Context, env [][2]string, limit time.Duration) error {
					return r.step(ctx, job, r.benchStepWith(job, ncu, env, limit))
				})
			} else {
				s = r.benchStep(job, ncu) // with the install the search found
				benchErr = r.step(ctx, job, s)
			}
			r.benchEnd = time.Now()
			ran = true
		case "fingerprint-after":
			if ran && ctx.Err() == nil {
				r.fingerprint(ctx, s)
			}
		}
	}
	return benchErr
}

// fingerprint runs a fingerprint step and copies what it wrote to the output directory
// (fingerprint-<phase>.json). It is evidence, not a phase: a failure is said and the shard
// goes on, and the phase a failed shard reports stays the one that failed.
func (r *execution) fingerprint(ctx context.Context, s Step) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	log, err := os.OpenFile(filepath.Join(r.root, s.Log), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	r.record(func(a *manifest.Accounting) { a.Begin(s.Name, time.Now()) })
	err = proc.Run(ctx, proc.Cmd{Argv: s.Argv, Env: s.Env, Stdout: log, Stderr: log, Grace: 5 * time.Second})
	log.Close()
	r.record(func(a *manifest.Accounting) { a.End(s.Name, time.Now()) })
	name := strings.TrimSuffix(s.Log, ".log") + ".json"
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(s.Argv[len(s.Argv)-1]); err == nil {
			err = files.WriteAtomic(filepath.Join(r.root, name), b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(r.o.Stderr, "opx: warning: no %s (the shard goes on): %v (log: %s)\n", name, err, filepath.Join(r.root, s.Log))
	}
}

// step runs one srun step on job and then checks that the allocation is still running:
// a step cut short by the allocation's end (cancelled, time limit, node failure) fails
// with that reason, even when srun exited 0 (beyond the seed).
func (r *execution) step(ctx context.Context, job string, s Step) error {
	err := r.command(ctx, s.Argv, s.Log, s.Env)
	if ctx.Err() != nil {
		return err
	}
	if endErr := r.o.Slurm.checkRunning(ctx, job); endErr != nil {
		return endErr
	}
	return err
}

func (r *execution) cache() string { return filepath.Join(r.base, "containers") }

// cachedImage reports whether the shard's squash is already in the shared cache, valid and
// this user's (or root's) own, as opx import on the node would find it: then the import
// step, one srun on the allocation, is skipped (beyond the seed, which always runs it and
// returns at once on a cache hit). The cache is on the shared storage the node mounts.
func (r *execution) cachedImage(ctx context.Context) (string, bool) {
	squash := r.squash()
	fi, err := os.Lstat(squash)
	if err != nil || files.CheckTrustedFile(squash, fi) != nil || files.CheckSharedDir(r.cache()) != nil {
		return squash, false
	}
	return squash, imagepkg.Validate(ctx, squash, "", r.o.Environ) == nil
}

// findNCU runs the search step and returns the install it picks ("" when none); its log
// is the list found.
func (r *execution) findNCU(ctx context.Context, s Step) string {
	ctx2, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	out, _ := proc.Output(ctx2, proc.Cmd{Argv: s.Argv, Env: s.Env})
	found := strings.Fields(out)
	_ = os.WriteFile(filepath.Join(r.root, s.Log), []byte(strings.Join(found, "\n")+"\n"), 0o644)
	return PickNCU(found)
}

// masterPort is MASTER_PORT for job; a dry run has no job yet and shows the formula.
func masterPort(job, id string) string {
	if job == dryJob {
		return fmt.Sprintf("<29500 + sha256(\"%s:%s\") mod 2000>", dryJob, id)
	}
	return strconv.Itoa(manifest.MasterPort(job, id))
}

func in(s string, list ...string) bool { return slices.Contains(list, s) }

// NCUSearch is the seed's Nsight Compute search (docs/compat-spec.md §2.2).
const NCUSearch = "ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/nsight-compute*/ncu /opt/nvidia/nsight-compute*/ncu $(command -v ncu) 2>/dev/null | xargs -r readlink -f | sort -u"

var digitsRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+`) })

// PickNCU is the seed's pick_ncu (docs/compat-spec.md §3.4).
func PickNCU(paths []string) string {
	version := func(p string) []int {
		name := filepath.Base(filepath.Dir(p))
		name = strings.TrimLeft(strings.TrimPrefix(name, "nsight-compute"), "-")
		var v []int
		for _, d := range digitsRE().FindAllString(name, -1) {
			n, _ := strconv.Atoi(d)
			v = append(v, n)
		}
		return v
	}
	less := func(a, b []int) bool {
		for i := 0; i < len(a) && i < len(b); i++ {
			if a[i] != b[i] {
				return a[i] < b[i]
			}
		}
		return len(a) < len(b)
	}
	best := ""
	var bestV []int
	for _, p := range paths {
		if !strings.Contains(filepath.Dir(p), "nsight-compute") {
			continue
		}
		if v := version(p); best == "" || less(bestV, v) {
			best, bestV = p, v
		}
	}
	if best != "" {
		return best
	}
	if len(paths) > 0 {
		return paths[len(paths)-1]
	}
	return ""
}
