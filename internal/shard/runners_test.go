package shard_test

// pyxis, enroot and Nsight Compute cannot run here, and the nine built-in runners' Slurm
// flags cannot be accepted by the loopback Slurm, so these tests put RECORDING FAKES of
// salloc, srun, scancel, squeue and scontrol first on PATH. The fakes log every argv and srun's
// environment; the tests then check the exact command lines and environment opx execute
// produces for each runner and mode — against a table written from docs/compat-spec.md §6 and, when
// ../shared is present, against the seed's own execute run on the same fakes.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/shard"
)

const fakeSlurm = `#!/bin/sh
# recording fake (see runners_test.go)
name=$(basename "$0")
n=$(wc -l < "$FAKE_SLURM_LOG" 2>/dev/null || echo 0)
{ printf '%s' "$name"; for a in "$@"; do printf '\t%s' "$a"; done; printf '\n'; } >> "$FAKE_SLURM_LOG"
case "$name" in
salloc) echo "salloc: Granted job allocation 4242" >&2 ;;
scontrol) echo "JobId=4242 JobName=x UserId=root(0) JobState=${FAKE_JOB_STATE:-RUNNING} Reason=None" ;;
srun)
  env -0 > "$FAKE_SLURM_LOG.$((n+1)).env"
  case "$*" in *"bash -c"*) printf '/opt/nvidia/nsight-compute/2025.1.0/ncu\n/usr/local/cuda-12.8/bin/ncu\n' ;; esac ;;
esac
exit 0
`

type call struct {
	argv []string
	env  map[string]string // srun only
}

type fakes struct {
	dir, bin, log string
}

func newFakes(t *testing.T, dir string) *fakes {
	f := &fakes{dir: dir, bin: filepath.Join(dir, "fakebin"), log: filepath.Join(dir, "slurm.log")}
	os.MkdirAll(f.bin, 0o755)
	for _, n := range []string{"salloc", "srun", "scancel", "squeue", "scontrol"} {
		if err := os.WriteFile(filepath.Join(f.bin, n), []byte(fakeSlurm), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// env is a small, known environment with the fakes first on PATH.
func (f *fakes) env(extra ...string) []string {
	return append([]string{"PATH=" + f.bin + ":" + os.Getenv("PATH"), "HOME=" + f.dir, "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"FAKE_SLURM_LOG=" + f.log}, extra...)
}

// calls reads and clears the log.
func (f *fakes) calls(t *testing.T) []call {
	t.Helper()
	b, _ := os.ReadFile(f.log)
	var out []call
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	i := 0
	for sc.Scan() {
		i++
		c := call{argv: strings.Split(sc.Text(), "\t")}
		if c.argv[0] == "srun" {
			c.env = map[string]string{}
			eb, _ := os.ReadFile(fmt.Sprintf("%s.%d.env", f.log, i))
			for _, kv := range strings.Split(string(eb), "\x00") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					c.env[k] = v
				}
			}
			os.Remove(fmt.Sprintf("%s.%d.env", f.log, i))
		}
		out = append(out, c)
	}
	os.Remove(f.log)
	return out
}

type runnerCase struct {
	label, cluster string
	gpus           int
	arm            bool
	operator       string // JSON members besides stage_dir
	salloc         string // flags after --job-name (without --comment)
	benchFlags     string // flags between --export=ALL and the rank command
	mounts         string // extra mounts after <stage>:/opx (timing mode)
}

var nine = []runnerCase{
	{"cluster:h100-dsxe", "h100_dgxc_8x", 8, false, `"partition": "hpc-gpu-1", "account": "customer", "exclude_nodes": "n0,n1"`,
		"--account=customer --exclude=n0,n1 --mem=0", "--container-remap-root --mpi=none", ""},
	{"cluster:h200-dgxc", "h200_dgxc_8x", 8, false, `"partition": "main"`, "", "--container-remap-root", ""},
	{"cluster:b200-nscale", "b200_nscale_8x", 8, false, `"partition": "batch_1", "account": "benchmark", "qos": "high"`,
		"--account=benchmark --qos=high --mem=0", "", ""},
	{"cluster:b300-dsxe", "b300_dsxe_8x", 8, false, `"partition": "batch_1", "account": "benchmark"`,
		"--account=benchmark --mem=0", "--container-remap-root --mpi=none", ""},
	{"cluster:gb200-nv", "gb200_nvl72_4x", 4, true, `"partition": "batch", "account": "benchmark"`,
		"--account=benchmark --mem=0 --cpus-per-task=35", "--container-remap-root", ""},
	{"cluster:gb300-nv", "gb300_nvl72_4x", 4, true, `"partition": "batch_1", "account": "benchmark", "exclude_nodes": "c3,c5", "enroot_cache_path": "/data/enroot-cache"`,
		"--account=benchmark --exclude=c3,c5 --mem=0 --cpus-per-task=35", "--container-remap-root", ""},
	{"cluster:mi300x-amd", "mi300x_amds_8x", 8, false, `"partition": "compute-0", "cpus_per_node": 128`,
		"--cpus-per-task=16", "--container-remap-root", ",/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"},
	{"cluster:mi325x-amds", "mi325x_amds_8x", 8, false, `"partition": "compute", "cpus_per_node": 256`,
		"--cpus-per-task=32", "--container-remap-root", ",/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"},
	{"cluster:mi355x-amds", "mi355x_8x", 8, false, `"partition": "compute", "cpus_per_node": 128`,
		"--cpus-per-task=16", "--container-remap-root", ""},
}

type recorded struct {
	dir         string
	cfg, toml   string
	tl          string
	seedRef     string
	stageRoot   string
	fakes       *fakes
	nvidia, amd string
	opxArm64    string
}

func newRecorded(t *testing.T) *recorded {
	r := &recorded{dir: t.TempDir()}
	r.stageRoot = filepath.Join(r.dir, "shared")
	os.MkdirAll(r.stageRoot, 0o755)
	r.fakes = newFakes(t, r.dir)
	var entries []string
	for _, c := range nine {
		plat := "linux/amd64"
		if c.arm {
			plat = "linux/arm64"
		}
		entries = append(entries, fmt.Sprintf(`%q: {"gpus_per_node": %d, "image_platform": %q, "operator": {%s, "stage_dir": %q}}`,
			c.label, c.gpus, plat, c.operator, r.stageRoot))
	}
	r.cfg = filepath.Join(r.dir, "platforms.json")
	os.WriteFile(r.cfg, []byte(`{"platforms": {`+strings.Join(entries, ",\n")+`}}`), 0o644)
	r.seedRef = filepath.Join(r.dir, "ref")
	r.tl = filepath.Join(r.seedRef, "testlists")
	os.MkdirAll(r.tl, 0o755)
	os.WriteFile(filepath.Join(r.tl, "tp2.json"), []byte(`[{"type": "gemm", "args": {"m": 128, "n": 256, "k": 64, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16", "parallel": {"tp": 2}}, "sources": []}]`), 0o644)
	r.nvidia = "nvcr.io/nvidia/vllm:26.01-py3@sha256:" + strings.Repeat("a", 64)
	r.amd = "rocm/vllm:rocm7.0_vllm_0.11@sha256:" + strings.Repeat("b", 64)
	r.toml = filepath.Join(r.seedRef, "containers.toml")
	os.WriteFile(r.toml, []byte(fmt.Sprintf("[nvidia.vllm]\nimage = %q\n\n[amd.vllm]\nimage = %q\n", r.nvidia, r.amd)), 0o644)
	// a stand-in arm64 binary for the GB runners (only staged, never run: srun is a fake)
	r.opxArm64 = filepath.Join(r.dir, "opx-linux-arm64")
	os.WriteFile(r.opxArm64, []byte("#!/bin/sh\necho arm64 stand-in\n"), 0o755)
	return r
}

func (r *recorded) plan(t *testing.T, label, mode string) (string, string) {
	t.Helper()
	m := filepath.Join(r.dir, "m-"+strings.TrimPrefix(label, "cluster:")+"-"+mode+".json")
	cmd := exec.Command(opxBin, "plan", "--runner", label, "--backends", "vllm", "--testlists", "tp2", "--world-sizes", "2",
		"--mode", mode, "--run-id", "31", "--attempt", "2", "--source-sha", "f00d", "--platform-config", r.cfg,
		"--testlist-dir", r.tl, "--containers", r.toml, "--out", m)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plan %s: %v", label, err)
	}
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(string(out))[1]
	return m, id
}

func executeArgs(m, id, out, cfg string) []string {
	return []string{"execute", "--platform-config", cfg, "--manifest", m, "--shard", id, "--output", out, "--run-id", "31",
		"--attempt", "2", "--source-sha", "f00d", "--runner-name", "gh-runner-7", "--time-minutes", "45", "--cleanup-seconds", "30"}
}

// runOpx runs opx execute on the fakes and returns the calls with the stage path replaced.
func (r *recorded) runOpx(t *testing.T, m, id, out string, env ...string) []call {
	t.Helper()
	cmd := exec.Command(opxBin, append(executeArgs(m, id, out, r.cfg), "--opx-binary-arm64", r.opxArm64)...)
	cmd.Env = r.fakes.env(env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("opx execute %s: %v\n%s", id, err, b)
	}
	return normalize(t, r.fakes.calls(t), out)
}

func normalize(t *testing.T, calls []call, out string) []call {
	t.Helper()
	ex, err := manifest.ReadExecution(t.Context(), filepath.Join(out, "execution.json"))
	if err != nil {
		t.Fatal(err)
	}
	fix := func(s string) string {
		s = strings.ReplaceAll(s, ex.Stage, "<STAGE>")
		s = strings.ReplaceAll(s, "python3 <STAGE>/source/operatorx/ci.py", "<STAGE>/bin/opx")
		return s
	}
	for i := range calls {
		joined := fix(strings.Join(calls[i].argv, "\t"))
		joined = strings.ReplaceAll(joined, "python3\t<STAGE>/source/operatorx/ci.py", "<STAGE>/bin/opx")
		joined = strings.ReplaceAll(joined, "python3\t/opx/source/operatorx/ci.py", "/opx/bin/opx")
		calls[i].argv = strings.Split(joined, "\t")
		for k, v := range calls[i].env {
			calls[i].env[k] = fix(v)
		}
	}
	return calls
}

func find(calls []call, pred func(c call) bool) []call {
	var out []call
	for _, c := range calls {
		if pred(c) {
			out = append(out, c)
		}
	}
	return out
}

// benchCall is the benchmark srun (run by the real timeout, so it is logged as srun).
func benchCall(t *testing.T, calls []call) call {
	t.Helper()
	b := find(calls, func(c call) bool { return c.argv[0] == "srun" && slices.Contains(c.argv, "rank") })
	if len(b) != 1 {
		t.Fatalf("want one benchmark srun, got %d in %v", len(b), calls)
	}
	return b[0]
}

func TestNineRunnersCommandLines(t *testing.T) {
	r := newRecorded(t)
	for _, rc := range nine {
		for _, mode := range []string{"timing", "counters"} {
			t.Run(strings.TrimPrefix(rc.label, "cluster:")+"-"+mode, func(t *testing.T) {
				m, id := r.plan(t, rc.label, mode)
				out := filepath.Join(r.dir, "out-opx-"+id)
				calls := r.runOpx(t, m, id, out, "NCCL_IB_HCA=mlx5_0", "NCCL_NET_PLUGIN=none", "NCCL_DEBUG=INFO")
				image, plat := r.nvidia, "linux/amd64"
				if strings.HasPrefix(rc.label, "cluster:mi") {
					image = r.amd
				}
				if rc.arm {
					plat = "linux/arm64"
				}
				digest := image[strings.LastIndex(image, "@")+1:]
				key := planKey(image, digest, plat)
				ex, err := manifest.ReadExecution(t.Context(), filepath.Join(out, "execution.json"))
				if err != nil {
					t.Fatal(err)
				}
				// each execution's tag is the shard's and a random suffix of its own
				token := ex.Token
				if !regexp.MustCompile(`^` + shard.Token("31", "2", id) + `-[0-9a-f]{8}$`).MatchString(token) {
					t.Errorf("execution.json token %q is not %s-<8 hex>", token, shard.Token("31", "2", id))
				}
				cache := filepath.Join(r.stageRoot, fmt.Sprintf(".operatorx-%d", os.Getuid()), "containers")

				wantSalloc := strings.Fields(fmt.Sprintf("salloc --no-shell --partition=%s --nodes=1 --gres=gpu:%d --ntasks-per-node=%d --exclusive --time=45 --job-name=gh-runner-7 %s --comment=%s",
					partitionOf(rc.operator), rc.gpus, rc.gpus, rc.salloc, token))
				s := find(calls, func(c call) bool { return c.argv[0] == "salloc" })
				if len(s) != 1 || !slices.Equal(s[0].argv, wantSalloc) {
					t.Errorf("salloc\n got %q\nwant %q", s, wantSalloc)
				}
				imp := find(calls, func(c call) bool { return slices.Contains(c.argv, "import") })
				wantImp := []string{"srun", "--jobid=4242", "--nodes=1", "--ntasks=1", "--chdir=/tmp", "<STAGE>/bin/opx", "import",
					"--cache", cache, "--image", image, "--digest", digest, "--uri", enrootURI(image), "--image-platform", plat}
				if len(imp) != 1 || !slices.Equal(imp[0].argv, wantImp) {
					t.Fatalf("import\n got %q\nwant %q", imp, wantImp)
				}
				if want := map[bool]string{true: "/data/enroot-cache"}[rc.label == "cluster:gb300-nv"]; imp[0].env["ENROOT_CACHE_PATH"] != want {
					t.Errorf("import ENROOT_CACHE_PATH = %q, want %q", imp[0].env["ENROOT_CACHE_PATH"], want)
				}
				mounts := "<STAGE>:/opx"
				ncuSearch := find(calls, func(c call) bool { return slices.Contains(c.argv, "-c") })
				if mode == "counters" && !strings.HasPrefix(rc.label, "cluster:mi") {
					want := []string{"srun", "--jobid=4242", "--nodes=1", "--ntasks=1", "bash", "-c", shard.NCUSearch}
					if len(ncuSearch) != 1 || !slices.Equal(ncuSearch[0].argv, want) {
						t.Errorf("ncu search %q", ncuSearch)
					}
					mounts += ",/opt/nvidia/nsight-compute:/opt/nvidia/nsight-compute"
					if b, _ := os.ReadFile(filepath.Join(out, "ncu.log")); string(b) != "/opt/nvidia/nsight-compute/2025.1.0/ncu\n/usr/local/cuda-12.8/bin/ncu\n" {
						t.Errorf("ncu.log = %q", b)
					}
				} else if len(ncuSearch) != 0 {
					t.Errorf("unexpected ncu search %q", ncuSearch)
				}
				mounts += rc.mounts
				b := benchCall(t, calls)
				wantBench := append([]string{"srun", "--jobid=4242", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--kill-on-bad-exit=1", "--chdir=/tmp",
					"--container-image=" + filepath.Join(cache, key+".sqsh"), "--container-mounts=" + mounts, "--container-workdir=/opx",
					"--no-container-mount-home", "--no-container-entrypoint", "--container-writable", "--container-env=" + containerEnv(rc, mode), "--export=ALL"}, strings.Fields(rc.benchFlags)...)
				wantBench = append(wantBench, "/opx/bin/opx", "rank")
				if !slices.Equal(b.argv, wantBench) {
					t.Errorf("benchmark\n got %q\nwant %q", b.argv, wantBench)
				}
				want := map[string]string{
					"OPERATORX_CLUSTER": rc.cluster, "OPERATORX_CONTAINER_IMAGE": image, "OPERATORX_IMAGE_DIGEST": digest,
					"OPERATORX_IMAGE_PLATFORM": plat, "OPERATORX_GPUS_PER_NODE": fmt.Sprint(rc.gpus), "OPERATORX_SOURCE_SHA": "f00d",
					"OPERATORX_GITHUB_RUN_ID": "31", "OPERATORX_GITHUB_RUN_ATTEMPT": "2", "OPERATORX_SHARD_ID": id,
					"OPERATORX_BACKENDS": "vllm", "OPERATORX_MODE": mode, "OPERATORX_RECIPE": "", "OPERATORX_ENGINE_ARGS": "{}",
					"OPERATORX_TESTLISTS": "tp2", "PYTHONPATH": "/opx/source", "PYTHONDONTWRITEBYTECODE": "1", "WORLD_SIZE": "2",
					"OPERATORX_PARALLEL": `{"dcp": 1, "dp": 1, "ep": 1, "tp": 2}`, "MASTER_ADDR": "127.0.0.1",
					"MASTER_PORT": fmt.Sprint(masterPort("4242", id)), "NCCL_DEBUG": "INFO",
				}
				if !strings.HasPrefix(rc.label, "cluster:mi") {
					want["NCCL_CUMEM_ENABLE"] = "1"
				}
				if mode == "counters" && !strings.HasPrefix(rc.label, "cluster:mi") {
					want["OPERATORX_NCU"] = "/opt/nvidia/nsight-compute/2025.1.0/ncu"
				}
				for k, v := range want {
					if got, ok := b.env[k]; !ok || got != v {
						t.Errorf("benchmark env %s = %q (set %v), want %q", k, got, ok, v)
					}
				}
				for _, k := range []string{"NCCL_IB_HCA", "NCCL_NET_PLUGIN", "OPERATORX_MODEL_CONFIG", "OPX_STAGE"} {
					if v, ok := b.env[k]; ok {
						t.Errorf("benchmark env has %s=%s", k, v)
					}
				}
				if sc := find(calls, func(c call) bool { return c.argv[0] == "scancel" }); len(sc) == 0 || !slices.Equal(sc[0].argv, []string{"scancel", "4242"}) {
					t.Errorf("scancel calls %q", sc)
				}
			})
		}
	}
}

func partitionOf(operator string) string {
	return regexp.MustCompile(`"partition": "([^"]+)"`).FindStringSubmatch(operator)[1]
}

func planKey(image, digest, plat string) string { return manifest.ImageKey(image, digest, plat) }

func enrootURI(image string) string { return plan.EnrootURI(image) }

func masterPort(job, id string) int { return manifest.MasterPort(job, id) }

// TestNineRunnersMatchOperatorXCI runs the seed's execute on the same fakes and compares every
// Slurm command line and the benchmark environment with opx's, after mapping the seed's
// Python launcher to opx's binary (decisions §6) and dropping opx's --comment token.
func TestNineRunnersMatchOperatorXCI(t *testing.T) {
	seedtree, err := filepath.Abs("../../../shared/seed/seedtree")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(seedtree); err != nil {
		t.Skip("../shared is absent: no OperatorX CI (ci.py) to compare with")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to run OperatorX CI (ci.py)")
	}
	// the interpreter itself, not a version-manager shim that adds its own variables
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	python := strings.TrimSpace(string(py))
	r := newRecorded(t)
	tree := filepath.Join(r.dir, "seedtree")
	if out, err := exec.Command(seedtree, r.seedRef, tree).CombinedOutput(); err != nil {
		t.Fatalf("seedtree: %v %s", err, out)
	}
	for _, rc := range nine {
		for _, mode := range []string{"timing", "counters"} {
			t.Run(strings.TrimPrefix(rc.label, "cluster:")+"-"+mode, func(t *testing.T) {
				m, id := r.plan(t, rc.label, mode)
				outOpx := filepath.Join(r.dir, "out-opx-"+id)
				opxCalls := r.runOpx(t, m, id, outOpx, "NCCL_DEBUG=INFO")
				outSeed := filepath.Join(r.dir, "out-seed-"+id)
				cmd := exec.Command(python, append([]string{"-m", "operatorx.ci"}, executeArgs(m, id, outSeed, r.cfg)...)...)
				cmd.Env = r.fakes.env("PYTHONPATH="+tree, "NCCL_DEBUG=INFO")
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("seed execute: %v\n%s", err, b)
				}
				seedCalls := normalize(t, r.fakes.calls(t), outSeed)
				strip := func(calls []call) []string {
					var out []string
					for _, c := range calls {
						if c.argv[0] == "squeue" && slices.Contains(c.argv, "%A %k") || c.argv[0] == "scontrol" {
							continue // opx's token lookup and its check that each step's job still runs (beyond the seed)
						}
						if c.argv[0] == "srun" && slices.Contains(c.argv, "fingerprint") {
							continue // the node's fingerprint before and after the benchmark (beyond the seed)
						}
						argv := slices.DeleteFunc(slices.Clone(c.argv), func(a string) bool {
							return strings.HasPrefix(a, "--comment=opx-") || strings.HasPrefix(a, "--container-env=") // beyond the seed
						})
						out = append(out, strings.Join(argv, " "))
					}
					return out
				}
				if a := strip(opxCalls); len(a) < 4 {
					t.Fatalf("too few calls recorded to compare: %q", a)
				}
				if a, b := strip(opxCalls), strip(seedCalls); !slices.Equal(a, b) {
					t.Errorf("command lines differ\n opx: %q\nseed: %q", a, b)
				}
				ob, sb := benchCall(t, opxCalls), benchCall(t, seedCalls)
				for k, sv := range sb.env {
					if ov, ok := ob.env[k]; !ok || ov != sv {
						t.Errorf("benchmark env %s: opx %q (set %v), seed %q", k, ov, ok, sv)
					}
				}
				for k, ov := range ob.env {
					if _, ok := sb.env[k]; !ok {
						t.Errorf("benchmark env %s=%q is opx's only", k, ov)
					}
				}
				for _, f := range []string{"status.json", "cleanup.log"} {
					a, _ := os.ReadFile(filepath.Join(outOpx, f))
					b, _ := os.ReadFile(filepath.Join(outSeed, f))
					if !bytes.Equal(a, b) {
						t.Errorf("%s differs\n opx: %s\nseed: %s", f, a, b)
					}
				}
			})
		}
	}
}

func TestContainerNoneCommandLines(t *testing.T) {
	r := newRecorded(t)
	cfg := filepath.Join(r.dir, "none.json")
	os.WriteFile(cfg, []byte(`{"platforms": {"cluster:lab-h100": {"cluster": "lab_h100_8x", "gpus_per_node": 8, "image_platform": "linux/amd64",
	  "operator": {"container": "none", "partition": "gpu", "stage_dir": "`+r.stageRoot+`"}}}}`), 0o644)
	m := filepath.Join(r.dir, "m-none.json")
	out, err := exec.Command(opxBin, "plan", "--runner", "cluster:lab-h100", "--backends", "cpu", "--testlists", "tp2", "--world-sizes", "2",
		"--run-id", "31", "--attempt", "2", "--source-sha", "f00d", "--platform-config", cfg, "--testlist-dir", r.tl, "--out", m).Output()
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(string(out))[1]
	o := filepath.Join(r.dir, "out-none")
	cmd := exec.Command(opxBin, executeArgs(m, id, o, cfg)...)
	cmd.Env = r.fakes.env()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, b)
	}
	calls := normalize(t, r.fakes.calls(t), o)
	if imp := find(calls, func(c call) bool { return slices.Contains(c.argv, "import") }); len(imp) != 0 {
		t.Errorf("container none ran an import: %q", imp)
	}
	b := benchCall(t, calls)
	want := []string{"srun", "--jobid=4242", "--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--kill-on-bad-exit=1", "--chdir=/tmp", "--export=ALL", "<STAGE>/bin/opx", "rank"}
	if !slices.Equal(b.argv, want) {
		t.Errorf("benchmark\n got %q\nwant %q", b.argv, want)
	}
	if b.env["OPX_STAGE"] != "<STAGE>" || b.env["OPERATORX_BACKENDS"] != "cpu" || b.env["OPERATORX_CONTAINER_IMAGE"] != "" {
		t.Errorf("env OPX_STAGE=%q OPERATORX_BACKENDS=%q OPERATORX_CONTAINER_IMAGE=%q", b.env["OPX_STAGE"], b.env["OPERATORX_BACKENDS"], b.env["OPERATORX_CONTAINER_IMAGE"])
	}
}

// TestModelConfigFromEndpoint: a recipe shard's config.json comes from HF_ENDPOINT (a
// local HTTP server here); OPERATORX_MODEL_CONFIG is set only when it came.
func TestModelConfigFromEndpoint(t *testing.T) {
	r := newRecorded(t)
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		asked = append(asked, q.URL.Path)
		if q.URL.Path == "/deepseek-ai/DeepSeek-V3/raw/main/config.json" {
			w.Write([]byte(`{"model_type": "deepseek_v3", "hidden_size": 7168}`))
			return
		}
		http.NotFound(w, q)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		ckpt string
		ok   bool
	}{{"deepseek-ai/DeepSeek-V3", true}, {"nobody/missing", false}} {
		m, id := r.plan(t, "cluster:h200-dgxc", "timing")
		// make it a recipe shard (execute reads checkpoint from the cell; the id is the plan's)
		mv, _ := pyjson.Parse(must(os.ReadFile(m)))
		inc, _ := mv.(*pyjson.Object).Array("include")
		inc[0].(*pyjson.Object).Set("checkpoint", tc.ckpt)
		os.WriteFile(m, pyjson.MustMarshal(mv, pyjson.File), 0o644)
		out := filepath.Join(r.dir, "out-model-"+strings.ReplaceAll(tc.ckpt, "/", "_"))
		cmd := exec.Command(opxBin, executeArgs(m, id, out, r.cfg)...)
		cmd.Env = r.fakes.env("HF_ENDPOINT=" + srv.URL + "/")
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v", err)
		}
		b := benchCall(t, normalize(t, r.fakes.calls(t), out))
		got, set := b.env["OPERATORX_MODEL_CONFIG"]
		if tc.ok {
			if !set || got != "/opx/models/"+tc.ckpt {
				t.Errorf("OPERATORX_MODEL_CONFIG = %q (set %v)", got, set)
			}
		} else {
			if set {
				t.Errorf("OPERATORX_MODEL_CONFIG set to %q without a config", got)
			}
			want := "[operatorx] no config.json for nobody/missing: GET " + srv.URL + "/nobody/missing/raw/main/config.json: 404 Not Found"
			if !strings.Contains(string(stdout), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
	}
	if len(asked) != 2 || asked[0] != "/deepseek-ai/DeepSeek-V3/raw/main/config.json" {
		t.Errorf("server was asked %q", asked)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestDryRunTouchesNothing(t *testing.T) {
	r := newRecorded(t)
	m, id := r.plan(t, "cluster:gb300-nv", "counters")
	out := filepath.Join(r.dir, "out-dry")
	cmd := exec.Command(opxBin, append(executeArgs(m, id, out, r.cfg), "--dry-run", "--opx-binary-arm64", r.opxArm64)...)
	cmd.Env = r.fakes.env("NCCL_IB_HCA=mlx5_0")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.fakes.log); err == nil {
		t.Errorf("dry run called Slurm: %s", must(os.ReadFile(r.fakes.log)))
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("dry run created the output directory")
	}
	if ents, _ := os.ReadDir(r.stageRoot); len(ents) != 0 {
		t.Errorf("dry run wrote to the stage root: %v", ents)
	}
	text := string(stdout)
	base := filepath.Join(r.stageRoot, fmt.Sprintf(".operatorx-%d", os.Getuid()))
	for _, want := range []string{
		"salloc --no-shell --partition=batch_1 --nodes=1 --gres=gpu:4 --ntasks-per-node=4 --exclusive --time=45 --job-name=gh-runner-7 --account=benchmark --exclude=c3,c5 --mem=0 --cpus-per-task=35 --comment=" + shard.Token("31", "2", id),
		`srun "--jobid=$JOB" --nodes=1 --ntasks=1 --chdir=/tmp ` + base + "/31-2-" + id + "-XXXXXXXX/bin/opx import --cache " + base + "/containers",
		"+ENROOT_CACHE_PATH=/data/enroot-cache",
		`srun "--jobid=$JOB" --nodes=1 --ntasks=1 bash -c 'ls -d /opt/nvidia/nsight-compute/*/ncu`,
		"timeout -k 30 2400 srun \"--jobid=$JOB\" --nodes=1 --ntasks=2",
		"+OPERATORX_IMAGE_PLATFORM=linux/arm64",
		"+NCCL_CUMEM_ENABLE=1",
		"-NCCL_IB_HCA",
		"copy " + r.opxArm64 + " -> ",
		// the benchmark step as execute builds it once the search found an install: its
		// root mounted, OPERATORX_NCU set and kept over the image's
		`,$NCU_ROOT:$NCU_ROOT'`, ",OPERATORX_NCU --export=ALL", "+OPERATORX_NCU='$NCU_ROOT/$NCU_VERSION/ncu'",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, text)
		}
	}
}

// containerEnv is the --container-env list execute must give pyxis: every variable it sets
// for the rank, in the order it sets them, but PYTHONPATH (the rank merges the image's).
func containerEnv(rc runnerCase, mode string) string {
	names := []string{"OPERATORX_CLUSTER", "OPERATORX_CONTAINER_IMAGE", "OPERATORX_IMAGE_DIGEST", "OPERATORX_IMAGE_PLATFORM",
		"OPERATORX_GPUS_PER_NODE", "OPERATORX_SOURCE_SHA", "OPERATORX_GITHUB_RUN_ID", "OPERATORX_GITHUB_RUN_ATTEMPT",
		"OPERATORX_SHARD_ID", "OPERATORX_BACKENDS", "OPERATORX_MODE", "OPERATORX_RECIPE", "OPERATORX_ENGINE_ARGS",
		"OPERATORX_TESTLISTS", "PYTHONDONTWRITEBYTECODE", "WORLD_SIZE", "OPERATORX_PARALLEL", "MASTER_ADDR", "MASTER_PORT"}
	amd := strings.HasPrefix(rc.label, "cluster:mi")
	if !amd {
		names = append(names, "NCCL_CUMEM_ENABLE")
	}
	if mode == "counters" && !amd {
		names = append(names, "OPERATORX_NCU")
	}
	return strings.Join(names, ",")
}
