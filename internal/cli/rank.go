package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/bench"
	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pyjson"
)

// NCUMetrics is the seed's counter list (seed-spec §2.2), in order.
const NCUMetrics = "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,gpc__cycles_elapsed.avg.per_second,dram__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_active.sum,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,dram__bytes_read.sum,dram__bytes_read.avg,dram__bytes_read.min,dram__bytes_read.max,dram__bytes_write.sum,lts__t_sectors.sum,lts__t_sectors.avg,lts__t_sectors.min,lts__t_sectors.max,lts__t_sector_hit_rate.pct,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sectors_aperture_sysmem_op_read.sum,lts__t_sectors_aperture_sysmem_op_write.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"

// RocprofPasses are the seed's rocprofv3 passes, in order (seed-spec §2.2).
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

func newRankCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "rank",
		Short: "Set up one rank's environment and run the benchmark (inside the container)",
		Long: `Run by srun once per rank: checks SLURM_PROCID, SLURM_LOCALID and
WORLD_SIZE, sets RANK, LOCAL_RANK, PYTHONPATH and a private HOME (made by the rank,
refused when another user made it, removed afterwards), then runs the harness
(opx bench for the cpu backend, python3 -m operatorx otherwise), under ncu or rocprofv3
in counters mode. The stage is /opx, or $OPX_STAGE on runners without a container.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runRank(c.Context(), env) },
	}
}

func runRank(ctx context.Context, env Env) error {
	for _, k := range []string{"SLURM_PROCID", "SLURM_LOCALID", "WORLD_SIZE"} {
		if env.getenv(k) == "" {
			return fmt.Errorf("required rank input missing: %s", k)
		}
	}
	// beyond the seed: numbers, and a rank inside the world, before anything is created
	var nums [3]int
	for i, k := range []string{"SLURM_PROCID", "SLURM_LOCALID", "WORLD_SIZE"} {
		n, err := strconv.Atoi(env.getenv(k))
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%s is not a non-negative integer", k, pyjson.Repr(env.getenv(k)))
		}
		nums[i] = n
	}
	if nums[2] < 1 || nums[0] >= nums[2] {
		return fmt.Errorf("SLURM_PROCID=%d is outside WORLD_SIZE=%d", nums[0], nums[2])
	}
	root := env.getenv("OPX_STAGE")
	if root == "" {
		root = "/opx"
	}
	vars := map[string]string{}
	rank := env.getenv("SLURM_PROCID")
	vars["RANK"] = rank
	source := filepath.Join(root, "source")
	paths := []string{source}
	for _, p := range strings.Split(env.getenv("PYTHONPATH"), ":") {
		if p != "" && p != source && p != "/opx/source" {
			paths = append(paths, p)
		}
	}
	vars["PYTHONPATH"] = strings.Join(paths, ":")
	vars["LOCAL_RANK"] = env.getenv("SLURM_LOCALID")
	job := env.getenv("SLURM_JOB_ID")
	if job == "" {
		return errors.New("required rank input missing: SLURM_JOB_ID")
	}
	// the rank's private HOME: made here, or refused when someone else made it (another
	// user could have planted code that Python runs at start-up, as this user), and removed
	// when the harness ends
	cache := fmt.Sprintf("/tmp/operatorx-%s-%s", job, rank)
	if !files.SafeName(job) || !files.SafeName(rank) {
		return fmt.Errorf("SLURM_JOB_ID=%s is not a plain job id", pyjson.Repr(job))
	}
	if err := files.MkdirPrivate(cache); err != nil {
		return fmt.Errorf("rank cache %w", err)
	}
	defer os.RemoveAll(cache)
	vars["HOME"], vars["TRITON_CACHE_DIR"], vars["MPLCONFIGDIR"] = cache, cache+"/triton", cache+"/matplotlib"
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var bench []string
	if env.getenv("OPERATORX_BACKENDS") == "cpu" {
		bench = []string{self, "bench", "--strict", "--testlist-dir", root + "/testlists", "--results-dir", root + "/results"}
	} else {
		py, err := exec.LookPath("python3")
		if err != nil {
			return errors.New("the harness needs python3 in the image")
		}
		bench = []string{py, "-m", "operatorx", "--strict", "--testlist-dir", root + "/testlists", "--results-dir", root + "/results"}
	}
	mode := env.getenv("OPERATORX_MODE")
	if mode == "" {
		mode = "timing"
	}
	childEnv := func() []string {
		out := append([]string(nil), env.environ()...)
		for k, v := range vars {
			out = proc.SetEnv(out, k, v)
		}
		return out
	}
	if mode != "counters" {
		if env.getenv("OPERATORX_BACKENDS") == "cpu" {
			// opx's own harness: run it in this process rather than exec a second opx
			return runBenchIn(ctx, childEnv(), root)
		}
		return runHarness(ctx, env, bench, childEnv())
	}
	for k, v := range map[string]string{"OPERATORX_PROFILE": "1", "OPERATORX_PROFILE_MARKERS": "1", "OPERATORX_PROFILE_ITERS": "1",
		"OPERATORX_WARMUP_MIN_S": "0", "OPERATORX_FIRST_WARMUP_S": "0", "OPERATORX_COOLDOWN_RATIO": "0", "OPERATORX_THROTTLE_RETRIES": "0"} {
		vars[k] = v
	}
	out := root + "/results/counters"
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if rocprof, err := exec.LookPath("rocprofv3"); err == nil {
		for i, p := range RocprofPasses {
			argv := append([]string{rocprof, "--pmc"}, strings.Fields(p[1])...)
			argv = append(argv, "--kernel-trace", "--marker-trace", "--output-format", "csv", "-d", out+"/"+p[0], "-o", "rank"+rank, "--")
			argv = append(argv, bench...)
			if i > 0 { // result rows come from the first pass only
				argv[len(argv)-1] = cache + "/results-" + p[0]
			}
			if err := proc.Run(ctx, proc.Cmd{Argv: argv, Env: childEnv(), Stdout: env.Stdout, Stderr: env.Stderr}); err != nil {
				return err
			}
		}
		return nil
	}
	ncu := env.getenv("OPERATORX_NCU")
	if ncu == "" {
		ncu, _ = exec.LookPath("ncu")
	}
	if ncu == "" {
		return errors.New("counters mode needs ncu: none in the image, and the node has none under /opt/nvidia/nsight-compute, /usr/local/cuda*/nsight-compute* or on PATH")
	}
	argv := append([]string{ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include", "regex:opx[0-9]+/",
		"--metrics", NCUMetrics, "--csv", "--log-file", out + "/ncu-rank" + rank + ".csv"}, bench...)
	return runHarness(ctx, env, argv, childEnv())
}

// runHarness runs the harness as a child (not exec: the rank removes its private cache
// afterwards) and exits as it did: its exit status, or 128+n when a signal ended it. A
// signal to the rank reaches the harness's process group through proc (SIGTERM, grace,
// SIGKILL).
func runHarness(ctx context.Context, env Env, argv, environ []string) error {
	err := proc.Run(ctx, proc.Cmd{Argv: argv, Env: environ, Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr})
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

func newBenchCmd(env Env) *cobra.Command {
	var o bench.Options
	var lists string
	c := &cobra.Command{
		Use:   "bench",
		Short: "opx's built-in cpu backend: benchmark testlist GEMMs on this CPU",
		Long: `The harness of the cpu backend: runs the shapes of the selected
testlists whose split matches OPERATORX_PARALLEL, fp32/fp64 GEMMs with gonum (other dtypes
and op types give 'unsupported' rows), and writes <results-dir>/cpu/<cluster>/<run>.json
from rank 0, checkpointed after every op. --strict exits 1 on any error row.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if lists != "" {
				o.Testlists = strings.Split(lists, ",")
			}
			o.Getenv, o.Environ = env.getenv, env.environ()
			_, err := bench.Run(c.Context(), o, nil)
			return err
		},
	}
	f := c.Flags()
	f.BoolVar(&o.Strict, "strict", false, "record unsupported ops and fail on errors")
	f.StringVar(&o.TestlistDir, "testlist-dir", "", "testlist directory (default: embedded)")
	f.StringVar(&o.ResultsDir, "results-dir", "results", "where to write results")
	f.StringVar(&lists, "testlists", "", "comma-separated testlists (default: $OPERATORX_TESTLISTS, else all)")
	return c
}
