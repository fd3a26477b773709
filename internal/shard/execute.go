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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/files"
	imagepkg "github.com/semianalysis/opx/internal/image"
	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pyjson"
)

// Options are execute's flags and surroundings.
type Options struct {
	Shard, RunID, Attempt, SourceSHA, RunnerName string
	TimeMinutes, CleanupSeconds                  int
	Manifest, Output                             string
	Registry                                     *platform.Registry
	BinaryFor                                    func(imagePlatform string) (string, error) // the opx binary to stage
	HarnessDir                                   string                                     // harness sources staged as source/ ("" = none)
	Binary                                       string                                     // set by Execute from BinaryFor
	Getenv                                       func(string) string
	Environ                                      []string
	Stdout, Stderr                               io.Writer
	Slurm                                        *Slurm
	HTTPClient                                   *http.Client // model configs (nil: default)
	// DryRun prints each step's command line and environment changes and touches
	// neither Slurm nor storage.
	DryRun bool
}

// SafeID reports whether v is what run ids, attempts, shard ids and cluster names must look
// like before they become parts of paths (files.SafeName).
func SafeID(v string) bool { return files.SafeName(v) }

func checkID(what, v string) error {
	if !SafeID(v) {
		return fmt.Errorf("invalid %s %s: use letters, digits, '.', '_' and '-'", what, pyjson.Repr(v))
	}
	return nil
}

// Execute runs one shard (seed-spec §6). It returns the process exit code's cause: nil on
// success; the finalize error when cleanup failed (status.json is then not written).
func Execute(ctx context.Context, o Options) (err error) {
	for _, c := range []struct{ what, v string }{{"run id", o.RunID}, {"attempt", o.Attempt}, {"shard id", o.Shard}} {
		if err := checkID(c.what, c.v); err != nil {
			return err
		}
	}
	root, err := filepath.Abs(o.Output)
	if err != nil {
		return err
	}
	if !o.DryRun {
		if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
			return err
		}
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(root)); err == nil {
		root = filepath.Join(r, filepath.Base(root))
	}
	exists := fmt.Errorf("output directory %s already exists; each execution needs a new one", root)
	if o.DryRun {
		if _, err := os.Lstat(root); err == nil {
			return exists
		}
	} else if err := os.Mkdir(root, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return exists
		}
		return err
	}
	mv, err := catalog.Disk(o.Manifest).ReadJSON()
	if err != nil {
		return err
	}
	manifest, ok := mv.(*pyjson.Object)
	if !ok {
		return fmt.Errorf("%s: a manifest is a JSON object", o.Manifest)
	}
	sha, _ := manifest.String("source_sha")
	run, _ := manifest.String("run_id")
	if sha != o.SourceSHA || run != o.RunID {
		return errors.New("manifest source/run mismatch")
	}
	include, _ := manifest.Array("include")
	var cell *pyjson.Object
	for _, c := range include {
		if co, ok := c.(*pyjson.Object); ok {
			if id, _ := co.String("id"); id == o.Shard {
				cell = co
				break
			}
		}
	}
	if cell == nil {
		return fmt.Errorf("shard %s is not in %s", o.Shard, o.Manifest)
	}
	label, _ := cell.String("runner")
	runner, ok := o.Registry.Runner(label)
	entry, ok2 := o.Registry.Entry(label)
	if !ok || !ok2 {
		return fmt.Errorf("runner %s of shard %s has no platform entry", label, o.Shard)
	}
	profile := platform.Operator(entry)
	gpus, okG := intField(entry, "gpus_per_node")
	if !okG {
		return fmt.Errorf("platform entry for %s needs an integer gpus_per_node", label)
	}
	imagePlatform, _ := entry.String("image_platform")
	cg, okC := intField(cell, "gpus_per_node")
	cip, _ := cell.String("image_platform")
	ws, okW := intField(cell, "world_size")
	if !okC || !okW {
		return fmt.Errorf("shard %s in %s needs integer gpus_per_node and world_size", o.Shard, o.Manifest)
	}
	if cg != gpus || cip != imagePlatform || ws > gpus {
		return errors.New("manifest hardware differs from the selected runner")
	}
	if ws < 1 {
		return fmt.Errorf("shard %s in %s has world_size %d; it must be at least 1", o.Shard, o.Manifest, ws)
	}
	if err := checkCell(cell); err != nil {
		return fmt.Errorf("shard %s in %s: %v", o.Shard, o.Manifest, err)
	}
	binary, err := o.BinaryFor(imagePlatform)
	if err != nil {
		return err
	}
	o.Binary = binary
	if img, _ := cell.String("image"); img != "" && platform.ContainerMode(label, entry) == "pyxis" {
		// beyond the seed: refuse before allocating, not on the node after the wait
		if d, _ := cell.String("digest"); !plan.ValidDigest(d) {
			return fmt.Errorf("shard %s in %s has no image digest for %s (digest %s); plan resolves one: plan again", o.Shard, o.Manifest, img, pyjson.Repr(d))
		}
	}
	base, err := StageBase(profile, runner, o.Getenv)
	if err != nil {
		return err
	}
	if base, err = checkBase(base, !o.DryRun); err != nil {
		return err
	}
	if platform.ContainerMode(label, entry) == "pyxis" {
		if err := MountableStage(base); err != nil {
			return err
		}
	}
	token, err := NewToken(o.RunID, o.Attempt, o.Shard)
	if err != nil {
		return err
	}
	prefix := o.RunID + "-" + o.Attempt + "-" + o.Shard + "-"
	r := &runner_{o: o, root: root, stage: filepath.Join(base, prefix+"XXXXXXXX"), base: base, cell: cell, runner: runner,
		profile: profile, gpus: gpus, ws: ws, imagePlatform: imagePlatform, mode: platform.ContainerMode(label, entry),
		token: token}
	if o.DryRun {
		r.token = Token(o.RunID, o.Attempt, o.Shard) + "-XXXXXXXX"
		return r.dryRun()
	}
	stage, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return err
	}
	r.stage = stage
	if err := files.WriteJSON(filepath.Join(root, "execution.json"), pyjson.Obj(
		"cell", cell, "source_sha", o.SourceSHA, "run_id", o.RunID, "attempt", o.Attempt, "stage", stage, "token", token)); err != nil {
		os.RemoveAll(stage)
		return err
	}
	rc := 1
	defer func() {
		// finalize with a context of its own: a cancelled execute must still clean up
		ferr := finalize(context.WithoutCancel(ctx), o.Slurm, root, o.CleanupSeconds, !r.allocated && runner.Label != platform.Local)
		if ferr != nil {
			err = ferr
			return
		}
		if !r.benchEnd.IsZero() {
			if jobs := AllocationIDs(root); len(jobs) > 0 {
				fmt.Fprintf(o.Stderr, "opx: allocation %s released and stage removed %.3f s after the benchmark ended\n",
					strings.Join(jobs, ","), time.Since(r.benchEnd).Seconds())
			}
		}
		status := pyjson.Obj("exit_code", rc, "slurm_jobs", AllocationIDs(root))
		if werr := files.WriteJSON(filepath.Join(root, "status.json"), status); werr != nil && err == nil {
			err = werr
		}
	}()
	if err := r.run(ctx); err != nil {
		return err
	}
	rc = 0
	return nil
}

// checkBase returns the stage base with the symlinks above it resolved, after checking it
// is ours alone — a real directory, owned by us, no group or other bits (seed-spec §6 step
// 7) — and that nobody else could swap it: every directory above it is owned by root or us
// and, when others may write it, sticky. create makes the base when it is missing (a dry
// run only checks one that is there).
func checkBase(base string, create bool) (string, error) {
	unsafe := func(err error) error { return fmt.Errorf("unsafe shared OperatorX stage directory %s", err) }
	if !filepath.IsAbs(base) {
		return "", fmt.Errorf("the stage base %s is not an absolute path", base)
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
			return "", err
		}
	}
	if up, err := filepath.EvalSymlinks(filepath.Dir(base)); err == nil {
		base = filepath.Join(up, filepath.Base(base))
	} else if create {
		return "", err
	}
	if err := files.CheckAncestors(base); err != nil && (create || !errors.Is(err, fs.ErrNotExist)) {
		return "", unsafe(err)
	}
	var err error
	if create {
		err = files.MkdirPrivate(base)
	} else if err = files.CheckPrivateDir(base); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		var ue *files.UntrustedError
		if errors.As(err, &ue) {
			return "", unsafe(err)
		}
		return "", err
	}
	return base, nil
}

func intField(o *pyjson.Object, k string) (int64, bool) {
	v, _ := o.Get(k)
	n, ok := v.(pyjson.Int)
	if !ok {
		return 0, false
	}
	return n.Int64()
}

type runner_ struct {
	o                   Options
	root, stage, base   string
	cell, profile       *pyjson.Object
	runner              platform.Runner
	gpus, ws            int64
	imagePlatform, mode string
	token               string    // the allocation's tag (--comment)
	benchEnd            time.Time // when the benchmark step returned
	allocated           bool      // salloc returned and allocation.log names the one job
}

// command is the seed's command(): announce the phase, log the child's output, and on
// failure show the log's tail.
func (r *runner_) command(ctx context.Context, argv []string, log string, env []string) error {
	fmt.Fprintf(r.o.Stdout, "[operatorx] phase=%s\n", strings.TrimSuffix(log, ".log"))
	f, err := os.OpenFile(filepath.Join(r.root, log), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = proc.Run(ctx, proc.Cmd{Argv: argv, Env: env, Stdout: f, Stderr: f, Grace: 10 * time.Second})
	f.Close()
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

func (r *runner_) run(ctx context.Context) error {
	if err := r.stageFiles(ctx); err != nil {
		return err
	}
	if r.runner.Label == platform.Local {
		return r.runLocal(ctx)
	}
	alloc, err := r.allocArgv()
	if err != nil {
		return err
	}
	if err := r.command(ctx, alloc, "allocation.log", r.o.Environ); err != nil {
		return err
	}
	jobs := AllocationIDs(r.root)
	if len(jobs) != 1 {
		return errors.New("could not identify the unique Slurm allocation")
	}
	job := jobs[0]
	r.allocated = true
	if argv, env := r.importStep(job); argv != nil {
		if squash, ok := r.cachedImage(ctx); ok {
			fmt.Fprintf(r.o.Stdout, "[operatorx] phase=import (cache hit: %s)\n", squash)
		} else if err := r.command(ctx, argv, "import.log", env); err != nil {
			return err
		}
	}
	env, keep := r.benchEnv(job)
	mounts := r.stage + ":/opx"
	if r.searchesNCU() {
		if ncu := r.findNCU(ctx, job); ncu != "" {
			root := filepath.Dir(filepath.Dir(ncu))
			mounts += "," + root + ":" + root
			env = proc.SetEnv(env, "OPERATORX_NCU", ncu)
			keep = append(keep, "OPERATORX_NCU")
		}
	}
	err = r.step(ctx, job, r.benchArgv(job, mounts, keep), "benchmark.log", env)
	r.benchEnd = time.Now()
	return err
}

// step runs one srun step on job and then checks that the allocation is still running:
// a step cut short by the allocation's end (cancelled, time limit, node failure) fails
// with that reason, even when srun exited 0 (beyond the seed).
func (r *runner_) step(ctx context.Context, job string, argv []string, log string, env []string) error {
	err := r.command(ctx, argv, log, env)
	if ctx.Err() != nil {
		return err
	}
	if endErr := r.o.Slurm.checkRunning(ctx, job); endErr != nil {
		return endErr
	}
	return err
}

// allocArgv is the salloc command line (seed-spec §6 step 11.6), tagged with the shard's
// token beyond the seed.
func (r *runner_) allocArgv() ([]string, error) {
	partition, ok := r.profile.String("partition")
	if !ok {
		return nil, fmt.Errorf("platform entry for %s has no operator.partition", r.runner.Label)
	}
	alloc := []string{"salloc", "--no-shell", "--partition=" + partition, "--nodes=1",
		fmt.Sprintf("--gres=gpu:%d", r.gpus), fmt.Sprintf("--ntasks-per-node=%d", r.gpus), "--exclusive",
		fmt.Sprintf("--time=%d", r.o.TimeMinutes), "--job-name=" + r.o.RunnerName}
	for _, f := range [][2]string{{"account", "account"}, {"qos", "qos"}, {"exclude_nodes", "exclude"}} {
		if v, _ := r.profile.Get(f[0]); pyjson.Truthy(v) {
			alloc = append(alloc, "--"+f[1]+"="+fmt.Sprint(strings.Trim(string(pyjson.MustMarshal(v, pyjson.Default)), `"`)))
		}
	}
	hw := r.runner.Family
	if in(hw, "b200", "b300", "h100", "gb200", "gb300") {
		alloc = append(alloc, "--mem=0")
	}
	if in(hw, "gb200", "gb300") {
		alloc = append(alloc, "--cpus-per-task=35")
	}
	if r.runner.AMD() {
		cpus, _ := r.profile.Get("cpus_per_node")
		n, ok := cpus.(pyjson.Int)
		v, fits := n.Int64()
		if !ok || !fits {
			return nil, fmt.Errorf("platform entry for %s needs an integer operator.cpus_per_node", r.runner.Label)
		}
		alloc = append(alloc, fmt.Sprintf("--cpus-per-task=%d", v/r.gpus))
	}
	// beyond the seed: tag the allocation so cleanup finds it even if allocation.log does not
	return append(alloc, "--comment="+r.token), nil
}

func (r *runner_) cache() string { return filepath.Join(r.base, "containers") }

// cachedImage reports whether the shard's squash is already in the shared cache, valid and
// this user's (or root's) own, as opx import on the node would find it: then the import
// step, one srun on the allocation, is skipped (beyond the seed, which always runs it and
// returns at once on a cache hit). The cache is on the shared storage the node mounts.
func (r *runner_) cachedImage(ctx context.Context) (string, bool) {
	image, _ := r.cell.String("image")
	digest, _ := r.cell.String("digest")
	squash := filepath.Join(r.cache(), plan.ImageKey(image, digest, r.imagePlatform)+".sqsh")
	fi, err := os.Lstat(squash)
	if err != nil || files.CheckTrustedFile(squash, fi) != nil || files.CheckSharedDir(r.cache()) != nil {
		return squash, false
	}
	return squash, imagepkg.Validate(ctx, squash, "", r.o.Environ) == nil
}

// importStep is the srun that runs opx import on the node (pyxis runners only) and its
// environment; nil when the runner has no container.
func (r *runner_) importStep(job string) ([]string, []string) {
	if r.mode != "pyxis" {
		return nil, nil
	}
	c := r.cell
	image, _ := c.String("image")
	digest, _ := c.String("digest")
	uri, _ := c.String("import_uri")
	argv := []string{"srun", "--jobid=" + job, "--nodes=1", "--ntasks=1", "--chdir=/tmp", filepath.Join(r.stage, "bin", "opx"), "import",
		"--cache", r.cache(), "--image", image, "--digest", digest, "--uri", uri, "--image-platform", r.imagePlatform}
	env := r.o.Environ
	if p, _ := r.profile.String("enroot_cache_path"); p != "" {
		env = proc.SetEnv(append([]string(nil), env...), "ENROOT_CACHE_PATH", p)
	}
	return argv, env
}

// searchesNCU: counters mode on an NVIDIA pyxis runner looks for Nsight Compute on the node.
func (r *runner_) searchesNCU() bool {
	mode, _ := r.cell.String("mode")
	return mode == "counters" && !r.runner.AMD() && r.mode == "pyxis"
}

func (r *runner_) ncuSearchArgv(job string) []string {
	return []string{"srun", "--jobid=" + job, "--nodes=1", "--ntasks=1", "bash", "-c", NCUSearch}
}

// benchArgv is the benchmark command line (seed-spec §6 step 11.15); mounts is the stage
// mount plus the ncu install when one was found.
func (r *runner_) benchArgv(job, mounts string, keep []string) []string {
	hw := r.runner.Family
	if in(hw, "mi300x", "mi325x") {
		mounts += ",/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"
	}
	run := []string{"srun", "--jobid=" + job, "--nodes=1", fmt.Sprintf("--ntasks=%d", r.ws),
		fmt.Sprintf("--ntasks-per-node=%d", r.ws), "--kill-on-bad-exit=1", "--chdir=/tmp"}
	if r.mode == "pyxis" {
		image, _ := r.cell.String("image")
		digest, _ := r.cell.String("digest")
		key := plan.ImageKey(image, digest, r.imagePlatform)
		run = append(run, "--container-image="+filepath.Join(r.cache(), key+".sqsh"), "--container-mounts="+mounts,
			"--container-workdir=/opx", "--no-container-mount-home", "--no-container-entrypoint", "--container-writable",
			// beyond the seed: the variables execute sets keep its values over the image's ENV
			"--container-env="+strings.Join(keep, ","))
	}
	run = append(run, "--export=ALL")
	if r.mode == "pyxis" && (in(hw, "h200", "b300", "h100", "gb200", "gb300") || r.runner.AMD()) {
		run = append(run, "--container-remap-root")
	}
	if in(hw, "b300", "h100") {
		run = append(run, "--mpi=none")
	}
	if r.mode == "pyxis" {
		run = append(run, "/opx/bin/opx", "rank")
	} else {
		run = append(run, filepath.Join(r.stage, "bin", "opx"), "rank")
	}
	limit := max(300, r.o.TimeMinutes*60-300)
	return append([]string{"timeout", "-k", "30", strconv.Itoa(limit)}, run...)
}

func (r *runner_) findNCU(ctx context.Context, job string) string {
	ctx2, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	out, _ := proc.Output(ctx2, proc.Cmd{Argv: r.ncuSearchArgv(job), Env: r.o.Environ})
	found := strings.Fields(out)
	_ = os.WriteFile(filepath.Join(r.root, "ncu.log"), []byte(strings.Join(found, "\n")+"\n"), 0o644)
	return PickNCU(found)
}

// stageFiles lays out the stage (seed-spec §12.8): the opx binary, harness sources, the
// model config, the testlists and an empty results directory.
func (r *runner_) stageFiles(ctx context.Context) error {
	if r.o.Binary == "" {
		return errors.New("no opx binary to stage for " + r.imagePlatform)
	}
	if err := os.MkdirAll(filepath.Join(r.stage, "bin"), 0o755); err != nil {
		return err
	}
	if err := stageBinary(r.o.Binary, filepath.Join(r.stage, "bin", "opx")); err != nil {
		return fmt.Errorf("staging %s: %w", r.o.Binary, err)
	}
	if r.o.HarnessDir != "" {
		if err := copyTree(r.o.HarnessDir, filepath.Join(r.stage, "source")); err != nil {
			return fmt.Errorf("staging harness %s: %w", r.o.HarnessDir, err)
		}
	}
	if ckpt, _ := r.cell.String("checkpoint"); ckpt != "" {
		r.stageModelConfig(ctx, ckpt)
	}
	byList, err := testlistsOf(r.cell)
	if err != nil {
		return err
	}
	for name, shapes := range byList {
		if err := files.WriteJSON(filepath.Join(r.stage, "testlists", name+".json"), shapes); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(r.stage, "results"), 0o755)
}

// stageBinary puts the opx binary into the stage: a hard link when the stage is on the
// same filesystem and the binary is already executable (removing the stage only unlinks
// it), else a copy made executable.
func stageBinary(src, dst string) error {
	if fi, err := os.Stat(src); err == nil && fi.Mode().Perm()&0o111 == 0o111 && os.Link(src, dst) == nil {
		return nil
	}
	if err := copyFile(src, dst); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755)
}

// MountableStage checks that pyxis can mount a stage under base (beyond the seed): pyxis
// splits --container-mounts at ',' and each mount at ':', and rejects such a source at step
// launch — after the allocation and the import. execute, its dry run and doctor refuse it
// first. (The stage's own name is run id, attempt and shard id: plain names.)
func MountableStage(base string) error {
	if strings.ContainsAny(base, ":,") {
		return fmt.Errorf("the stage base %s holds ':' or ',', which pyxis cannot mount (--container-mounts); choose a storage root without them", catalog.Show(base))
	}
	return nil
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkCell validates, before anything is created or allocated, every cell field that
// becomes a path, an argument or an environment variable (beyond the seed, which trusts
// the manifest): the cluster names the harness's results directory; backends are joined
// with "," into OPERATORX_BACKENDS; env members become variables; mode, image and import
// URI become arguments.
func checkCell(cell *pyjson.Object) error {
	if cluster, _ := cell.String("cluster"); !SafeID(cluster) {
		return fmt.Errorf("has cluster %s: use letters, digits, '.', '_' and '-'", pyjson.Repr(cluster))
	}
	backends, ok := cell.Array("backends")
	if !ok || len(backends) == 0 {
		return errors.New("needs a non-empty backends list")
	}
	for _, b := range backends {
		if s, ok := b.(string); !ok || !SafeID(s) {
			return fmt.Errorf("has backend %s: use letters, digits, '.', '_' and '-'", pyjson.Repr(fmt.Sprint(b)))
		}
	}
	if mode, ok := cell.String("mode"); ok && mode != "timing" && mode != "counters" {
		return fmt.Errorf("has mode %s: timing or counters", pyjson.Repr(mode))
	}
	if v, ok := cell.Get("env"); ok && v != nil {
		e, isObj := v.(*pyjson.Object)
		if !isObj {
			return errors.New("env must be an object of strings")
		}
		for _, m := range e.Members() {
			val, isStr := m.Value.(string)
			if !envName.MatchString(m.Key) || !isStr || strings.ContainsRune(val, 0) {
				return fmt.Errorf("env member %s is not NAME: string", pyjson.Repr(m.Key))
			}
		}
	}
	for _, k := range []string{"image", "import_uri"} {
		if v, _ := cell.String(k); strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("has %s %s: no spaces or control characters", k, pyjson.Repr(v))
		}
	}
	if uri, _ := cell.String("import_uri"); uri != "" && !strings.HasPrefix(uri, "docker://") {
		return fmt.Errorf("has import_uri %s: it must be docker://...", pyjson.Repr(uri))
	}
	return nil
}

// testlistsOf groups the cell's case shapes by testlist, in case order.
func testlistsOf(cell *pyjson.Object) (map[string][]pyjson.Value, error) {
	cases, _ := cell.Array("cases")
	byList := map[string][]pyjson.Value{}
	for _, cv := range cases {
		co, ok := cv.(*pyjson.Object)
		if !ok {
			return nil, errors.New("manifest case is not an object")
		}
		name, _ := co.String("testlist")
		if !catalog.ValidTestlistName(name) {
			return nil, fmt.Errorf("manifest case names an invalid testlist %s", pyjson.Repr(name))
		}
		shape, _ := co.Get("shape")
		byList[name] = append(byList[name], shape)
	}
	return byList, nil
}

// masterPort is MASTER_PORT for job; a dry run has no job yet and shows the formula.
func masterPort(job, id string) string {
	if job == dryJob {
		return fmt.Sprintf("<29500 + sha256(\"%s:%s\") mod 2000>", dryJob, id)
	}
	return strconv.Itoa(plan.MasterPort(job, id))
}

// networkPrefixes is the seed's network-variable scrub (seed-spec §2.2).
var networkPrefixes = []string{"NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_", "NVSHMEM_", "MORI_RDMA_", "UCCL_"}

// benchEnv is the benchmark environment contract (seed-spec §6 step 11), with the scrub's
// image-key bug fixed (decisions §5). keep names the variables execute sets, which must
// reach the rank with these values even when the image's ENV sets them too (pyxis gives
// the image precedence over exported variables; --container-env reverses it for these
// names). PYTHONPATH is not among them: the rank puts /opx/source first itself and keeps
// the image's entries after it.
func (r *runner_) benchEnv(job string) (env, keep []string) {
	c := r.cell
	id, _ := c.String("id")
	image, _ := c.String("image")
	digest, _ := c.String("digest")
	env = append([]string(nil), r.o.Environ...)
	set := func(k, v string) {
		env = proc.SetEnv(env, k, v)
		if k != "PYTHONPATH" && !contains(keep, k) {
			keep = append(keep, k)
		}
	}
	backends, _ := c.Array("backends")
	var bs []string
	for _, b := range backends {
		s, _ := b.(string)
		bs = append(bs, s)
	}
	cases, _ := c.Array("cases")
	lists := map[string]bool{}
	for _, cv := range cases {
		n, _ := cv.(*pyjson.Object).String("testlist")
		lists[n] = true
	}
	var names []string
	for n := range lists {
		names = append(names, n)
	}
	sort.Strings(names)
	mode, ok := c.String("mode")
	if !ok {
		mode = "timing"
	}
	recipe, _ := c.String("recipe")
	engineArgs, _ := c.Get("engine_args")
	if !pyjson.Truthy(engineArgs) {
		engineArgs = pyjson.NewObject()
	}
	par, _ := c.Get("parallel")
	if !pyjson.Truthy(par) {
		par = pyjson.NewObject()
	}
	cluster, _ := c.String("cluster")
	wsV, _ := c.Get("world_size")
	for _, kv := range [][2]string{
		{"OPERATORX_CLUSTER", cluster}, {"OPERATORX_CONTAINER_IMAGE", image}, {"OPERATORX_IMAGE_DIGEST", digest},
		{"OPERATORX_IMAGE_PLATFORM", r.imagePlatform}, {"OPERATORX_GPUS_PER_NODE", strconv.FormatInt(r.gpus, 10)},
		{"OPERATORX_SOURCE_SHA", r.o.SourceSHA}, {"OPERATORX_GITHUB_RUN_ID", r.o.RunID},
		{"OPERATORX_GITHUB_RUN_ATTEMPT", r.o.Attempt}, {"OPERATORX_SHARD_ID", id},
		{"OPERATORX_BACKENDS", strings.Join(bs, ",")}, {"OPERATORX_MODE", mode}, {"OPERATORX_RECIPE", recipe},
		{"OPERATORX_ENGINE_ARGS", string(pyjson.MustMarshal(engineArgs, pyjson.Default))},
		{"OPERATORX_TESTLISTS", strings.Join(names, ",")}, {"PYTHONPATH", "/opx/source"}, {"PYTHONDONTWRITEBYTECODE", "1"},
		{"WORLD_SIZE", string(pyjson.MustMarshal(wsV, pyjson.Default))},
		{"OPERATORX_PARALLEL", string(pyjson.MustMarshal(par, pyjson.Default))},
		{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", masterPort(job, id)},
	} {
		set(kv[0], kv[1])
	}
	ckpt, _ := c.String("checkpoint")
	if ckpt != "" {
		if fi, err := os.Stat(filepath.Join(r.stage, "models", ckpt, "config.json")); err == nil && fi.Mode().IsRegular() {
			set("OPERATORX_MODEL_CONFIG", "/opx/models/"+ckpt)
		}
	}
	kept := env[:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		scrub := false
		for _, p := range networkPrefixes {
			if strings.HasPrefix(name, p) {
				scrub = true
			}
		}
		if !scrub {
			kept = append(kept, kv)
		}
	}
	env = kept
	if !r.runner.AMD() {
		set("NCCL_CUMEM_ENABLE", "1")
	}
	if r.mode != "pyxis" {
		set("OPX_STAGE", r.stage)
	}
	if e, ok := c.Object("env"); ok {
		for _, m := range e.Members() {
			s, _ := m.Value.(string)
			set(m.Key, s)
		}
	}
	return env, keep
}

func in(s string, list ...string) bool { return contains(list, s) }

// NCUSearch is the seed's Nsight Compute search (seed-spec §2.2).
const NCUSearch = "ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/nsight-compute*/ncu /opt/nvidia/nsight-compute*/ncu $(command -v ncu) 2>/dev/null | xargs -r readlink -f | sort -u"

var digitsRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+`) })

// PickNCU is the seed's pick_ncu (seed-spec §3.4).
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
