// Package rank is `opx rank`, run once per rank inside the allocation: the rank's inputs
// checked, a private HOME, and the harness run.
//
// It is what runs once per rank inside the allocation (docs/compat-spec.md §8): `opx rank`
// checks the rank's Slurm inputs, gives it a private HOME, and runs the harness — opx's own
// cpu backend in process, python3 -m operatorx otherwise — under Nsight Compute or
// rocprofv3 in counters mode.
package rank

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/bench"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
)

// NCUMetrics is the seed's counter list (docs/compat-spec.md §2.2), in order.
const NCUMetrics = "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.avg.per_second,dram__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_active.sum,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,dram__bytes_read.sum,dram__bytes_read.avg,dram__bytes_read.min,dram__bytes_read.max,dram__bytes_write.sum,lts__t_sectors.sum,lts__t_sectors.avg,lts__t_sectors.min,lts__t_sectors.max,lts__t_sector_hit_rate.pct,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sectors_aperture_sysmem_op_read.sum,lts__t_sectors_aperture_sysmem_op_write.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"

// RocprofPasses are the seed's rocprofv3 passes, in order (docs/compat-spec.md §2.2).
var RocprofPasses = [][2]string{
	{"fetch", "FETCH_SIZE"}, {"hm", "TCC_HIT_sum TCC_MISS_sum"},
	{"rdhist", "TCC_EA0_RDREQ_128B_sum TCC_EA0_RDREQ_32B_sum TCC_EA0_RDREQ_64B_sum TCC_EA0_RDREQ_sum"},
	{"sqcomp", "SQ_BUSY_CYCLES SQ_INSTS_MFMA SQ_INSTS_VALU SQ_VALU_MFMA_BUSY_CYCLES SQ_WAVES SQ_WAVE_CYCLES"},
	{"sqmem", "SQ_INSTS_LDS_LOAD SQ_INSTS_LDS_STORE SQ_INSTS_SMEM SQ_INSTS_VMEM_RD SQ_INSTS_VMEM_WR SQ_LDS_BANK_CONFLICT"},
	{"stalls", "TCC_BUBBLE_sum TCC_EA0_RDREQ_DRAM_CREDIT_STALL_sum TCC_EA0_WRREQ_DRAM_CREDIT_STALL_sum"},
	{"tccops", "TCC_ATOMIC_sum TCC_READ_sum TCC_REQ_sum TCC_WRITE_sum"},
	{"tcp", "TCP_TAGRAM0_REQ_sum TCP_TOTAL_CACHE_ACCESSES_sum TCP_TOTAL_READ_sum TCP_TOTAL_WRITE_sum"},
	{"util", "LdsUtil MemUnitStalled SALUBusy VALUBusy VALUUtilization"},
	{"util2", "GPU_UTIL SQC_DCACHE_HITS SQC_ICACHE_HITS TD_TD_BUSY_sum"},
	{"wom", "GRBM_GUI_ACTIVE MfmaUtil OccupancyPercent WRITE_SIZE"},
	{"wrdst", "TCC_EA0_RDREQ_DRAM_sum TCC_EA0_WRREQ_64B_sum TCC_EA0_WRREQ_DRAM_sum TCC_EA0_WRREQ_sum"},
}

// Options are the rank's surroundings: its environment (what srun and execute set) and
// standard streams.
type Options struct {
	Getenv         func(string) string
	Environ        []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ExitError is the harness's exit, passed on as the rank's: its status, or 128+n when a
// signal ended it.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode is the status the process exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// rank is one rank's inputs, checked.
type rank struct {
	o        Options
	root, id string // the stage (/opx, or $OPX_STAGE) and SLURM_PROCID
	cache    string // the private HOME (made by Run)
	// cacheBase and cachePrefix are where and under what name it is made:
	// $SLURM_TMPDIR, else the stage; operatorx-<job>-<rank>-<random>
	cacheBase, cachePrefix string
	vars                   map[string]string
	harnessCmd             []string
}

// Run is `opx rank`.
func Run(ctx context.Context, o Options) error {
	r, err := inputs(o)
	if err != nil {
		return err
	}
	// the rank's private HOME: a fresh directory of a name no one can guess (another user
	// who made it first could plant code that Python runs at start-up, as this user, or
	// make the shard fail), under Slurm's per-job directory when the site has one (Slurm
	// removes it with the job, even when the rank is killed), else in the execution's own
	// stage (finalize and recover remove the stage, and it with it, on every path: a rank
	// killed before its own cleanup leaves nothing on the node); removed when the harness
	// ends
	if r.cache, err = os.MkdirTemp(r.cacheBase, r.cachePrefix); err != nil {
		return fmt.Errorf("rank cache: %w", err)
	}
	defer os.RemoveAll(r.cache)
	r.vars["HOME"], r.vars["TRITON_CACHE_DIR"], r.vars["MPLCONFIGDIR"] = r.cache, r.cache+"/triton", r.cache+"/matplotlib"
	if r.harnessCmd, err = r.harness(); err != nil {
		return err
	}
	mode := o.Getenv("OPERATORX_MODE")
	if mode == "" {
		mode = "timing"
	}
	if mode == "counters" {
		return r.counters(ctx)
	}
	if o.Getenv("OPERATORX_BACKENDS") == "cpu" {
		// opx's own harness: run it in this process rather than exec a second opx
		return runBenchIn(ctx, r.env(), r.root)
	}
	return r.runHarness(ctx, r.harnessCmd)
}

// inputs checks SLURM_PROCID, SLURM_LOCALID, WORLD_SIZE and SLURM_JOB_ID before anything is
// created, and works out the rank's variables.
func inputs(o Options) (*rank, error) {
	getenv := o.Getenv
	for _, k := range []string{"SLURM_PROCID", "SLURM_LOCALID", "WORLD_SIZE"} {
		if getenv(k) == "" {
			return nil, fmt.Errorf("required rank input missing: %s", k)
		}
	}
	// beyond the seed: numbers, and a rank inside the world
	var nums [3]int
	for i, k := range []string{"SLURM_PROCID", "SLURM_LOCALID", "WORLD_SIZE"} {
		n, err := strconv.Atoi(getenv(k))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%s is not a non-negative integer", k, pytext.Repr(getenv(k)))
		}
		nums[i] = n
	}
	if nums[2] < 1 || nums[0] >= nums[2] {
		return nil, fmt.Errorf("SLURM_PROCID=%d is outside WORLD_SIZE=%d", nums[0], nums[2])
	}
	r := &rank{o: o, root: getenv("OPX_STAGE"), id: getenv("SLURM_PROCID"), vars: map[string]string{}}
	if r.root == "" {
		r.root = "/opx"
	}
	r.vars["RANK"] = r.id
	source := filepath.Join(r.root, "source")
	paths := []string{source}
	for _, p := range strings.Split(getenv("PYTHONPATH"), ":") {
		if p != "" && p != source && p != "/opx/source" {
			paths = append(paths, p)
		}
	}
	r.vars["PYTHONPATH"] = strings.Join(paths, ":")
	r.vars["LOCAL_RANK"] = getenv("SLURM_LOCALID")
	job := getenv("SLURM_JOB_ID")
	if job == "" {
		return nil, errors.New("required rank input missing: SLURM_JOB_ID")
	}
	if !files.SafeName(job) || !files.SafeName(r.id) {
		return nil, fmt.Errorf("SLURM_JOB_ID=%s is not a plain job id", pytext.Repr(job))
	}
	r.cacheBase, r.cachePrefix = r.root, fmt.Sprintf("operatorx-%s-%s-", job, r.id)
	if d := getenv("SLURM_TMPDIR"); d != "" && filepath.IsAbs(d) {
		r.cacheBase = d
	}
	return r, nil
}

// harness is the harness's command line: opx bench for the cpu backend, else the Python
// harness of the image.
func (r *rank) harness() ([]string, error) {
	args := []string{"--strict", "--testlist-dir", r.root + "/testlists", "--results-dir", r.root + "/results"}
	if r.o.Getenv("OPERATORX_BACKENDS") == "cpu" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		return append([]string{self, "bench"}, args...), nil
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, errors.New("the harness needs python3 in the image")
	}
	return append([]string{py, "-m", "operatorx"}, args...), nil
}

// env is the harness's environment: the rank's, with its variables set.
func (r *rank) env() []string {
	out := append([]string(nil), r.o.Environ...)
	for k, v := range r.vars {
		out = proc.SetEnv(out, k, v)
	}
	return out
}

// counters runs the harness under rocprofv3 (one run per pass) when the image has it,
// else under Nsight Compute.
func (r *rank) counters(ctx context.Context) error {
	for k, v := range map[string]string{"OPERATORX_PROFILE": "1", "OPERATORX_PROFILE_MARKERS": "1", "OPERATORX_PROFILE_ITERS": "1",
		"OPERATORX_WARMUP_MIN_S": "0", "OPERATORX_FIRST_WARMUP_S": "0", "OPERATORX_COOLDOWN_RATIO": "0", "OPERATORX_THROTTLE_RETRIES": "0"} {
		r.vars[k] = v
	}
	out := r.root + "/results/counters"
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if rocprof, err := exec.LookPath("rocprofv3"); err == nil {
		for i, p := range RocprofPasses {
			argv := append([]string{rocprof, "--pmc"}, strings.Fields(p[1])...)
			argv = append(argv, "--kernel-trace", "--marker-trace", "--output-format", "csv", "-d", out+"/"+p[0], "-o", "rank"+r.id, "--")
			argv = append(argv, r.harnessCmd...)
			if i > 0 { // result rows come from the first pass only
				argv[len(argv)-1] = r.cache + "/results-" + p[0]
			}
			if err := proc.Run(ctx, proc.Cmd{Argv: argv, Env: r.env(), Stdout: r.o.Stdout, Stderr: r.o.Stderr}); err != nil {
				return err
			}
		}
		return nil
	}
	ncu := r.o.Getenv("OPERATORX_NCU")
	if ncu == "" {
		ncu, _ = exec.LookPath("ncu")
	}
	if ncu == "" {
		return errors.New("counters mode needs ncu: none in the image, and the node has none under /opt/nvidia/nsight-compute, /usr/local/cuda*/nsight-compute* or on PATH")
	}
	// beyond the seed: --print-nvtx-rename kernel names each kernel by its opx<index> range
	// in the CSV, which is how opx joins its counters to the case (internal/counters)
	argv := append([]string{ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include", "regex:opx[0-9]+/", "--print-nvtx-rename", "kernel",
		"--metrics", NCUMetrics, "--csv", "--log-file", out + "/ncu-rank" + r.id + ".csv"}, r.harnessCmd...)
	return r.runHarness(ctx, argv)
}

// runHarness runs the harness as a child (not exec: the rank removes its private cache
// afterwards) and exits as it did: its exit status, or 128+n when a signal ended it. A
// signal to the rank reaches the harness's process group through proc (SIGTERM, grace,
// SIGKILL).
func (r *rank) runHarness(ctx context.Context, argv []string) error {
	err := proc.Run(ctx, proc.Cmd{Argv: argv, Env: r.env(), Stdin: r.o.Stdin, Stdout: r.o.Stdout, Stderr: r.o.Stderr})
	var ee *proc.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		if ee.Code < 0 {
			return &ExitError{Code: 128 + int(ee.Signal)}
		}
		return &ExitError{Code: ee.Code}
	}
	return err
}

// runBenchIn is `opx bench --strict` on the stage, with environ as its environment.
func runBenchIn(ctx context.Context, environ []string, root string) error {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	o := bench.Options{Strict: true, TestlistDir: root + "/testlists", ResultsDir: root + "/results",
		Getenv: func(k string) string { return vars[k] }, Environ: environ}
	_, err := bench.Run(ctx, o, nil)
	return err
}
