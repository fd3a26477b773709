package shard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
)

// Step is one command execute runs: its phase name, its log in the output directory, its
// command line and its environment. Execute runs the list prepare's plan gives; the dry
// run prints the same list.
type Step struct {
	Name string // allocation, import, ncu, benchmark
	Log  string
	Argv []string
	Env  []string
}

// layoutOp is one thing execute puts into the stage before the first step.
type layoutOp struct {
	kind     string // copy-binary, copy-harness, fetch-model, write-testlist, mkdir
	src, dst string
	shapes   manifest.Testlist // write-testlist
}

// layout is the stage's contents (docs/compat-spec.md §12.8): the opx binary, harness sources, the
// model config, the testlists and an empty results directory.
func (r *execution) layout() []layoutOp {
	ops := []layoutOp{{kind: "copy-binary", src: r.binary, dst: filepath.Join(r.stage, "bin", "opx")}}
	if r.o.AB != nil {
		ops = append(ops, r.abLayout()...)
	} else if r.o.HarnessDir != "" {
		ops = append(ops, layoutOp{kind: "copy-harness", src: r.o.HarnessDir, dst: filepath.Join(r.stage, "source")})
	}
	if ckpt := r.cell.Checkpoint; ckpt != "" {
		ops = append(ops, layoutOp{kind: "fetch-model", src: ckpt, dst: filepath.Join(r.stage, "models", ckpt, "config.json")})
	}
	names, shapes, _ := r.cell.Testlists() // checked by prepare
	for _, n := range names {
		ops = append(ops, layoutOp{kind: "write-testlist", dst: filepath.Join(r.stage, "testlists", n+".json"), shapes: shapes[n]})
	}
	return append(ops, layoutOp{kind: "mkdir", dst: filepath.Join(r.stage, "results")})
}

// applyLayout carries out the layout.
func (r *execution) applyLayout(ctx context.Context) error {
	if r.binary == "" {
		return errors.New("no opx binary to stage for " + r.entry.ImagePlatform)
	}
	for _, op := range r.layout() {
		var err error
		switch op.kind {
		case "copy-binary":
			if err = os.MkdirAll(filepath.Dir(op.dst), 0o755); err == nil {
				if err = stageBinary(op.src, op.dst); err != nil {
					err = fmt.Errorf("staging %s: %w", op.src, err)
				}
			}
		case "copy-harness":
			if err = copyTree(op.src, op.dst); err != nil {
				err = fmt.Errorf("staging harness %s: %w", op.src, err)
			}
		case "fetch-model":
			r.stageModelConfig(ctx, op.src)
		case "write-testlist":
			err = op.shapes.Write(op.dst)
		case "mkdir":
			err = os.MkdirAll(op.dst, 0o755)
		}
		if err != nil {
			return err
		}
	}
	return nil
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

// excluding is the profile's salloc flags with the cell's nodes to avoid (a confirmation
// of opx history, measured anywhere but where the suspect was) added to its --exclude:
// one --exclude naming both.
func excluding(flags, nodes []string) []string {
	if len(nodes) == 0 {
		return flags
	}
	var out []string
	all := slices.Clone(nodes)
	for _, f := range flags {
		if v, ok := strings.CutPrefix(f, "--exclude="); ok {
			all = append(strings.Split(v, ","), all...)
			continue
		}
		out = append(out, f)
	}
	return append(out, "--exclude="+strings.Join(all, ","))
}

// allocStep is salloc (docs/compat-spec.md §6 step 11.6), tagged with the shard's token beyond the
// seed.
func (r *execution) allocStep() Step {
	e := r.entry
	alloc := []string{"salloc", "--no-shell", "--partition=" + e.Partition, "--nodes=1",
		fmt.Sprintf("--gres=gpu:%d", e.GPUsPerNode), fmt.Sprintf("--ntasks-per-node=%d", e.GPUsPerNode), "--exclusive",
		fmt.Sprintf("--time=%d", r.o.TimeMinutes), "--job-name=" + r.o.RunnerName}
	alloc = append(alloc, excluding(e.SallocFlags, r.cell.ExcludeNodes)...)
	hw := r.runner.Family
	if in(hw, "b200", "b300", "h100", "gb200", "gb300") {
		alloc = append(alloc, "--mem=0")
	}
	if in(hw, "gb200", "gb300") {
		alloc = append(alloc, "--cpus-per-task=35")
	}
	if r.runner.AMD() {
		alloc = append(alloc, fmt.Sprintf("--cpus-per-task=%d", e.CPUsPerNode/e.GPUsPerNode))
	}
	// beyond the seed: tag the allocation so cleanup finds it even if allocation.log does not
	alloc = append(alloc, "--comment="+r.token)
	return Step{Name: "allocation", Log: "allocation.log", Argv: alloc, Env: r.o.Environ}
}

// nodeSteps are the steps on the allocation job: the image import (pyxis runners), the
// Nsight Compute search (counters mode on NVIDIA pyxis runners) and the benchmark, which
// mounts the ncu install found (ncu, "" when none).
func (r *execution) nodeSteps(job, ncu string) []Step {
	var steps []Step
	if r.entry.Container == "pyxis" {
		argv := []string{"srun", "--jobid=" + job, "--nodes=1", "--ntasks=1", "--chdir=/tmp", filepath.Join(r.stage, "bin", "opx"), "import",
			"--cache", r.cache(), "--image", r.cell.Image, "--digest", r.cell.Digest, "--uri", r.cell.ImportURI, "--image-platform", r.entry.ImagePlatform}
		env := r.o.Environ
		if p := r.entry.EnrootCachePath; p != "" {
			env = proc.SetEnv(append([]string(nil), env...), "ENROOT_CACHE_PATH", p)
		}
		steps = append(steps, Step{Name: "import", Log: "import.log", Argv: argv, Env: env})
	}
	if r.searchesNCU() {
		steps = append(steps, Step{Name: "ncu", Log: "ncu.log", Env: r.o.Environ,
			Argv: []string{"srun", "--jobid=" + job, "--nodes=1", "--ntasks=1", "bash", "-c", NCUSearch}})
	}
	return append(steps, r.fingerprintStep(job, "before"), r.benchStep(job, ncu), r.fingerprintStep(job, "after"))
}

// fingerprintStep records the node (opx fingerprint, outside the container) before or
// after the benchmark, into the stage; execute copies it to the output. It never fails
// the shard. On a Slurm runner it is one srun step on job; on the local runner the staged
// opx runs here.
func (r *execution) fingerprintStep(job, phase string) Step {
	argv := []string{filepath.Join(r.stage, "bin", "opx"), "fingerprint", "--phase", phase, "--out", filepath.Join(r.stage, "fingerprint-"+phase+".json")}
	if r.runner.Label != platform.Local {
		argv = append([]string{"srun", "--jobid=" + job, "--nodes=1", "--ntasks=1", "--chdir=/tmp"}, argv...)
	}
	return Step{Name: "fingerprint-" + phase, Log: "fingerprint-" + phase + ".log", Env: r.o.Environ, Argv: argv}
}

// searchesNCU: counters mode on an NVIDIA pyxis runner looks for Nsight Compute on the node.
func (r *execution) searchesNCU() bool {
	return r.cell.Mode == "counters" && !r.runner.AMD() && r.entry.Container == "pyxis"
}

// squash is the cached image the benchmark runs in.
func (r *execution) squash() string {
	return filepath.Join(r.cache(), manifest.ImageKey(r.cell.Image, r.cell.Digest, r.entry.ImagePlatform)+".sqsh")
}

// benchStep is the benchmark (docs/compat-spec.md §6 step 11.15) with its environment.
func (r *execution) benchStep(job, ncu string) Step {
	return r.benchStepWith(job, ncu, nil, time.Duration(BenchmarkLimit(r.o.TimeMinutes))*time.Second)
}

// benchStepWith is the benchmark step with variables of its own (an A/B side's) and a
// timeout of limit (whole seconds, at least one).
func (r *execution) benchStepWith(job, ncu string, vars [][2]string, limit time.Duration) Step {
	env, keep := r.benchEnv(job)
	for _, kv := range vars {
		env = proc.SetEnv(env, kv[0], kv[1])
		if !slices.Contains(keep, kv[0]) {
			keep = append(keep, kv[0])
		}
	}
	mounts := r.stage + ":/opx"
	if ncu != "" {
		root := filepath.Dir(filepath.Dir(ncu))
		mounts += "," + root + ":" + root
		env = proc.SetEnv(env, "OPERATORX_NCU", ncu)
		keep = append(keep, "OPERATORX_NCU")
	}
	hw, pyxis := r.runner.Family, r.entry.Container == "pyxis"
	if in(hw, "mi300x", "mi325x") {
		mounts += ",/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"
	}
	run := []string{"srun", "--jobid=" + job, "--nodes=1", fmt.Sprintf("--ntasks=%d", r.ws),
		fmt.Sprintf("--ntasks-per-node=%d", r.ws), "--kill-on-bad-exit=1", "--chdir=/tmp"}
	if pyxis {
		run = append(run, "--container-image="+r.squash(), "--container-mounts="+mounts,
			"--container-workdir=/opx", "--no-container-mount-home", "--no-container-entrypoint", "--container-writable",
			// beyond the seed: the variables execute sets keep its values over the image's ENV
			"--container-env="+strings.Join(keep, ","))
	}
	run = append(run, "--export=ALL")
	if pyxis && (in(hw, "h200", "b300", "h100", "gb200", "gb300") || r.runner.AMD()) {
		run = append(run, "--container-remap-root")
	}
	if in(hw, "b300", "h100") {
		run = append(run, "--mpi=none")
	}
	if pyxis {
		run = append(run, "/opx/bin/opx", "rank")
	} else {
		run = append(run, filepath.Join(r.stage, "bin", "opx"), "rank")
	}
	argv := append([]string{"timeout", "-k", "30", strconv.Itoa(max(1, int(limit.Seconds())))}, run...)
	return Step{Name: "benchmark", Log: "benchmark.log", Argv: argv, Env: env}
}

// networkPrefixes is the seed's network-variable scrub (docs/compat-spec.md §2.2).
var networkPrefixes = []string{"NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_", "NVSHMEM_", "MORI_RDMA_", "UCCL_"}

// benchEnv is the benchmark environment contract (docs/compat-spec.md §6 step 11), with the scrub's
// image-key bug fixed (decisions §5). keep names the variables execute sets, which must
// reach the rank with these values even when the image's ENV sets them too (pyxis gives
// the image precedence over exported variables; --container-env reverses it for these
// names). PYTHONPATH is not among them: the rank puts /opx/source first itself and keeps
// the image's entries after it.
func (r *execution) benchEnv(job string) (env, keep []string) {
	env = append([]string(nil), r.o.Environ...)
	set := func(k, v string) {
		env = proc.SetEnv(env, k, v)
		if k != "PYTHONPATH" && !slices.Contains(keep, k) {
			keep = append(keep, k)
		}
	}
	for _, kv := range r.contractVars(job) {
		set(kv[0], kv[1])
	}
	if ckpt := r.cell.Checkpoint; ckpt != "" {
		if fi, err := os.Stat(filepath.Join(r.stage, "models", ckpt, "config.json")); err == nil && fi.Mode().IsRegular() {
			set("OPERATORX_MODEL_CONFIG", "/opx/models/"+ckpt)
		}
	}
	env = scrubNetwork(env)
	if !r.runner.AMD() {
		set("NCCL_CUMEM_ENABLE", "1")
	}
	if r.entry.Container != "pyxis" {
		set("OPX_STAGE", r.stage)
	}
	for _, m := range r.cell.Env {
		s, _ := m.Value.(string)
		set(m.Key, s)
	}
	return env, keep
}

// contractVars are the variables every rank gets, in the seed's order.
func (r *execution) contractVars(job string) [][2]string {
	c := r.cell
	names, _, _ := c.Testlists()
	return [][2]string{
		{"OPERATORX_CLUSTER", c.Cluster}, {"OPERATORX_CONTAINER_IMAGE", c.Image}, {"OPERATORX_IMAGE_DIGEST", c.Digest},
		{"OPERATORX_IMAGE_PLATFORM", r.entry.ImagePlatform}, {"OPERATORX_GPUS_PER_NODE", strconv.FormatInt(r.entry.GPUsPerNode, 10)},
		{"OPERATORX_SOURCE_SHA", r.o.SourceSHA}, {"OPERATORX_GITHUB_RUN_ID", r.o.RunID},
		{"OPERATORX_GITHUB_RUN_ATTEMPT", r.o.Attempt}, {"OPERATORX_SHARD_ID", c.ID},
		{"OPERATORX_BACKENDS", strings.Join(c.Backends, ",")}, {"OPERATORX_MODE", c.Mode}, {"OPERATORX_RECIPE", c.Recipe},
		{"OPERATORX_ENGINE_ARGS", c.EngineArgsJSON()},
		{"OPERATORX_TESTLISTS", strings.Join(names, ",")}, {"PYTHONPATH", "/opx/source"}, {"PYTHONDONTWRITEBYTECODE", "1"},
		{"WORLD_SIZE", strconv.FormatInt(c.WorldSize, 10)},
		{"OPERATORX_PARALLEL", c.ParallelJSON()},
		{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", masterPort(job, c.ID)},
	}
}

// scrubNetwork drops the variables the seed's scrub removes.
func scrubNetwork(env []string) []string {
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
	return kept
}
