package shard_test

// These tests run against the REAL stack scripts/real-stack.sh builds and starts: NVIDIA
// enroot 4.1.2 and 3.5.0 and pyxis 0.24.0 from the release sources in ../shared/thirdparty,
// a one-node Slurm with the pyxis plugin, and go-containerregistry's registry on loopback
// serving busybox images built offline. Nothing here is a fake; what still cannot run on
// this machine (GPUs, ncu, rocprofv3) is not used: the shards run opx's own cpu backend.
// scripts/test.sh starts the stack when ../shared/thirdparty is present and points
// OPX_REAL_STACK_ENV at it; without it these tests skip, saying why.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/semianalysis/opx/internal/image"
	"github.com/semianalysis/opx/internal/testenv"
)

type realStack struct {
	t                              *testing.T
	dir, conf, registry            string
	enroot, enroot35, opx, workdir string
}

// newRealStack reads the stack's env file. The binary staged into containers must be
// static (the busybox images have no libc): testenv.MainWithOpx builds it so.
func newRealStack(t *testing.T) *realStack {
	t.Helper()
	path := os.Getenv("OPX_REAL_STACK_ENV")
	if path == "" {
		if os.Getenv("OPX_REQUIRE_REAL_STACK") != "" {
			t.Fatal("OPX_REQUIRE_REAL_STACK is set but OPX_REAL_STACK_ENV is not")
		}
		t.Skip("no real pyxis/enroot stack: scripts/test.sh starts one (scripts/real-stack.sh) when ../shared/thirdparty is present")
	}
	vars := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	s := &realStack{t: t, dir: vars["OPX_REAL_STACK"], conf: vars["OPX_REAL_SLURM_CONF"], registry: vars["OPX_REAL_REGISTRY"],
		enroot: vars["OPX_REAL_ENROOT"], enroot35: vars["OPX_REAL_ENROOT_35"], opx: opxBin, workdir: t.TempDir()}
	t.Cleanup(func() {
		c := exec.Command("scancel", "-u", fmt.Sprint(os.Getuid()))
		c.Env = s.env("")
		c.Run()
	})
	return s
}

// env is this process's environment with the stack's Slurm and the given enroot first on
// PATH ("" for 4.1.2).
func (s *realStack) env(enroot string, extra ...string) []string {
	if enroot == "" {
		enroot = s.enroot
	}
	return append(append(os.Environ(), "SLURM_CONF="+s.conf, "PATH="+enroot+":"+os.Getenv("PATH")), extra...)
}

func (s *realStack) cmd(enroot string, args ...string) *exec.Cmd {
	c := exec.Command(s.opx, args...)
	c.Env = s.env(enroot)
	return c
}

func (s *realStack) digest(ref string) string {
	s.t.Helper()
	r, err := name.ParseReference(s.registry + "/" + ref)
	if err != nil {
		s.t.Fatal(err)
	}
	d, err := remote.Head(r)
	if err != nil {
		s.t.Fatalf("HEAD %s: %v", ref, err)
	}
	return d.Digest.String()
}

func (s *realStack) importArgs(cache, ref, digest string, extra ...string) []string {
	return append([]string{"import", "--cache", cache, "--image", s.registry + "/" + ref, "--digest", digest, "--image-platform", "linux/amd64"}, extra...)
}

// Real enroot imports: by tag through the image reference alone (a loopback registry host,
// parsed as Docker parses it), by digest with enroot 3.5 and 4.1 (the "#repo:sha256:" form
// opx emits), a moved tag, 8 concurrent imports of one image, a truncated squash.
func TestRealStackImport(t *testing.T) {
	s := newRealStack(t)
	d := s.digest("opx/busybox:1")
	cache := filepath.Join(s.workdir, "cache")
	r := run(s.cmd("", s.importArgs(cache, "opx/busybox:1", d)...))
	if r.code != 0 || !strings.Contains(r.stderr, "opx import: imported "+cache+"/") {
		t.Fatalf("import by tag: exit %d %s", r.code, r.stderr)
	}
	squash := strings.TrimSpace(r.stderr[strings.LastIndex(r.stderr, "imported ")+len("imported "):])
	if out, err := exec.Command("unsquashfs", "-l", squash).Output(); err != nil || !strings.Contains(string(out), "squashfs-root/bin/busybox") {
		t.Fatalf("the imported squash does not hold the image's rootfs: %v", err)
	}
	if r := run(s.cmd("", s.importArgs(cache, "opx/busybox:1", d)...)); r.code != 0 || !strings.Contains(r.stderr, "opx import: reused "+squash) {
		t.Errorf("second import: exit %d %s", r.code, r.stderr)
	}

	// by digest, with both enroot versions
	hex := strings.TrimPrefix(d, "sha256:")
	for _, e := range []string{s.enroot35, s.enroot} {
		c := filepath.Join(s.workdir, "cache-digest-"+filepath.Base(filepath.Dir(e)))
		uri := "docker://" + s.registry + "#opx/busybox:sha256:" + hex
		r := run(s.cmd(e, s.importArgs(c, "opx/busybox:1", d, "--uri", uri)...))
		if r.code != 0 || !strings.Contains(r.stderr, "opx import: imported ") {
			t.Errorf("import by digest with %s: exit %d %s", e, r.code, r.stderr)
		}
	}

	// a tag that moved after planning: refused, nothing published
	moving := s.registry + "/opx/moving:1"
	for i := 0; i < 2; i++ {
		img, _ := random.Image(512, 1)
		ref, _ := name.ParseReference(moving)
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			dg, _ := img.Digest()
			d = dg.String()
		}
	}
	c := filepath.Join(s.workdir, "cache-moved")
	if r := run(s.cmd("", s.importArgs(c, "opx/moving:1", d)...)); r.code != 1 || !strings.Contains(r.stderr, "image tag moved") {
		t.Errorf("moved tag: exit %d %s", r.code, r.stderr)
	}
	if sq, _ := filepath.Glob(filepath.Join(c, "*.sqsh")); len(sq) != 0 {
		t.Errorf("a squash of a moved tag was published: %v", sq)
	}

	// 8 imports at once into a fresh cache: one runs enroot, the others reuse its squash
	c = filepath.Join(s.workdir, "cache-8")
	d = s.digest("opx/busybox:1")
	var wg sync.WaitGroup
	outs := make([]outcome, 8)
	for i := range outs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = run(s.cmd("", s.importArgs(c, "opx/busybox:1", d)...)) }()
	}
	wg.Wait()
	imported := 0
	for i, o := range outs {
		if o.code != 0 {
			t.Errorf("concurrent import %d: exit %d %s", i, o.code, o.stderr)
		}
		if strings.Contains(o.stderr, "opx import: imported ") {
			imported++
		}
	}
	if imported != 1 {
		t.Errorf("%d of 8 concurrent imports ran enroot, want 1", imported)
	}

	// a real squash cut short is found and replaced
	fi, _ := os.Stat(squash)
	os.Truncate(squash, fi.Size()/2)
	r = run(s.cmd("", s.importArgs(cache, "opx/busybox:1", s.digest("opx/busybox:1"))...))
	if r.code != 0 || !strings.Contains(r.stderr, "is damaged") || !strings.Contains(r.stderr, "opx import: imported "+squash) {
		t.Errorf("truncated squash: exit %d %s", r.code, r.stderr)
	}
	if err := image.Validate(t.Context(), squash, "", nil); err != nil {
		t.Errorf("the replaced squash: %v", err)
	}
}

// pyxisPlatform declares three pyxis runners (a plain family, the h200 family with
// --container-remap-root, the h100 family with --mem=0 and --mpi=none) staging under root.
func (s *realStack) pyxisPlatform(root string) string {
	p := filepath.Join(s.workdir, "platforms.json")
	entry := func(fam string) string {
		return `{"cluster": "real_8x", "family": "` + fam + `", "gpus_per_node": 8, "image_platform": "linux/amd64",
		  "operator": {"partition": "debug", "stage_dir": "` + root + `"}}`
	}
	os.WriteFile(p, []byte(`{"platforms": {"cluster:real-plain": `+entry("lab")+`, "cluster:real-h200": `+entry("h200")+
		`, "cluster:real-h100": `+entry("h100")+`}}`), 0o644)
	return p
}

func (s *realStack) containers(ref string) string {
	p := filepath.Join(s.workdir, "containers-"+strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".toml")
	os.WriteFile(p, []byte("[nvidia.cpu]\nimage = \""+s.registry+"/"+ref+"\"\n"), 0o644)
	return p
}

func (s *realStack) testlists() string {
	tl := filepath.Join(s.workdir, "testlists")
	os.MkdirAll(tl, 0o755)
	os.WriteFile(filepath.Join(tl, "quick.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "sources": []}]`), 0o644)
	os.WriteFile(filepath.Join(tl, "quick2.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32", "parallel": {"tp": 2}}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16", "parallel": {"tp": 2}}, "sources": []}]`), 0o644)
	os.WriteFile(filepath.Join(tl, "two.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}]`), 0o644)
	return tl
}

// resultsRun reads the harness's run record from the one results file under out.
func resultsRun(t *testing.T, out string) (string, map[string]string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "results", "cpu", "*", "*.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	var doc struct {
		Run struct {
			Cluster string
			Env     map[string]string
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Base(filepath.Dir(files[0])); dir != doc.Run.Cluster {
		t.Errorf("results filed under %s for cluster %s", dir, doc.Run.Cluster)
	}
	return doc.Run.Cluster, doc.Run.Env
}

// A shard under real pyxis for three runner families and world sizes 1 and 2, from an
// image whose ENV sets variables of opx's environment contract: every variable execute
// sets reaches the rank with opx's value (results filed under opx's cluster, WORLD_SIZE
// and MASTER_PORT as planned), while the image's own variables stay.
func TestRealStackExecuteUnderPyxis(t *testing.T) {
	s := newRealStack(t)
	root := filepath.Join(s.workdir, "shared")
	os.MkdirAll(root, 0o755)
	cfg, tl, ct := s.pyxisPlatform(root), s.testlists(), s.containers("opx/busybox-env:1")
	for _, runner := range []string{"cluster:real-plain", "cluster:real-h200", "cluster:real-h100"} {
		for ws, list := range map[int]string{1: "quick", 2: "quick2"} {
			t.Run(fmt.Sprintf("%s-ws%d", strings.TrimPrefix(runner, "cluster:"), ws), func(t *testing.T) {
				m := filepath.Join(s.workdir, fmt.Sprintf("m-%s-%d.json", strings.TrimPrefix(runner, "cluster:"), ws))
				r := run(s.cmd("", "plan", "--runner", runner, "--backends", "cpu", "--testlists", list, "--world-sizes", fmt.Sprint(ws),
					"--run-id", "88", "--attempt", "1", "--source-sha", "abc", "--platform-config", cfg, "--testlist-dir", tl,
					"--containers", ct, "--out", m))
				if r.code != 0 {
					t.Fatalf("plan: %s", r.stderr)
				}
				id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(r.stdout)[1]
				out := filepath.Join(s.workdir, "out-"+id)
				r = run(s.cmd("", "execute", "--shard", id, "--run-id", "88", "--attempt", "1", "--source-sha", "abc", "--runner-name", "real",
					"--time-minutes", "10", "--cleanup-seconds", "30", "--manifest", m, "--platform-config", cfg, "--output", out))
				if r.code != 0 {
					b, _ := os.ReadFile(filepath.Join(out, "benchmark.log"))
					t.Fatalf("execute: exit %d %s\n%s", r.code, r.stderr, b)
				}
				if got := rows(t, out); got["ok"] != 1 || got["unsupported"] != 1 {
					t.Errorf("rows %v", got)
				}
				cluster, env := resultsRun(t, out)
				if cluster != "real_8x" || env["OPERATORX_CLUSTER"] != "real_8x" {
					t.Errorf("the image's OPERATORX_CLUSTER won: results say %q, env %q", cluster, env["OPERATORX_CLUSTER"])
				}
				for k, bad := range map[string]string{"WORLD_SIZE": "99", "MASTER_PORT": "1", "NCCL_CUMEM_ENABLE": "0"} {
					if env[k] == bad || env[k] == "" {
						t.Errorf("%s reached the rank as %q (the image's value is %q)", k, env[k], bad)
					}
				}
				if env["WORLD_SIZE"] != fmt.Sprint(ws) {
					t.Errorf("WORLD_SIZE %q, want %d", env["WORLD_SIZE"], ws)
				}
				if env["OPERATORX_IMAGE_ONLY"] != "kept" {
					t.Errorf("the image's own variable did not stay: %q", env["OPERATORX_IMAGE_ONLY"])
				}
				if q := squeueOn(s); q != "" {
					t.Errorf("jobs left: %q", q)
				}
				if stages, _ := filepath.Glob(filepath.Join(root, ".operatorx-*", "88-1-*")); len(stages) > 0 {
					t.Errorf("stage left behind: %v", stages)
				}
			})
		}
	}
}

func squeueOn(s *realStack) string {
	c := exec.Command("squeue", "-h", "-u", fmt.Sprint(os.Getuid()), "-o", "%A")
	c.Env = s.env("")
	out, _ := c.Output()
	return strings.TrimSpace(string(out))
}

// opx run over several shards under real pyxis, two at a time.
func TestRealStackRunSeveralShards(t *testing.T) {
	s := newRealStack(t)
	root := filepath.Join(s.workdir, "shared")
	os.MkdirAll(root, 0o755)
	dir := filepath.Join(s.workdir, "sweep")
	r := run(s.cmd("", "run", "--out", dir, "--runner", "cluster:real-h200", "--backends", "cpu", "--testlists", "two",
		"--world-sizes", "1", "--chunk-size", "1", "--platform-config", s.pyxisPlatform(root), "--testlist-dir", s.testlists(),
		"--containers", s.containers("opx/busybox:1"), "--max-parallel", "2", "--time-minutes", "10", "--cleanup-seconds", "30",
		"--run-id", "89", "--attempt", "1"))
	if r.code != 0 {
		t.Fatalf("opx run: exit %d %s\n%s", r.code, r.stdout, r.stderr)
	}
	st, ok, success := summaryOf(t, dir)
	if len(st) != 2 || ok != 2 || !success {
		t.Errorf("summary: %v ok=%d success=%v", st, ok, success)
	}
	if q := squeueOn(s); q != "" {
		t.Errorf("jobs left: %q", q)
	}
}

// doctor against the real tools: real srun with the pyxis plugin, real enroot 3.5.0 and
// 4.1.2 — both import the URIs opx emits, so both are ok — the enroot cache enroot itself
// would use (from its enroot.conf.d drop-in, not only the environment), and, for a user
// who is not root, the helpers' file capabilities.
func TestRealStackDoctor(t *testing.T) {
	s := newRealStack(t)
	root := filepath.Join(s.workdir, "shared")
	os.MkdirAll(root, 0o755)
	cfg := s.pyxisPlatform(root)
	for _, e := range []string{s.enroot35, s.enroot} {
		c := s.cmd(e, "doctor", "--runner", "cluster:real-plain", "--platform-config", cfg, "--min-free-gib", "0")
		r := run(c)
		v := strings.TrimPrefix(filepath.Base(filepath.Dir(e)), "enroot-")
		for _, want := range []string{"pyxis             ok      srun accepts --container-image",
			"enroot            ok      enroot " + v + ": imports by tag and by digest",
			"ENROOT_CACHE_PATH in " + filepath.Dir(e) + "/etc/enroot/enroot.conf.d/opx-real-stack.conf"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("enroot %s: doctor lacks %q (exit %d)\n%s%s", v, want, r.code, r.stdout, r.stderr)
			}
		}
	}
}

// pushHeavy pushes opx/heavy:1: the busybox image with a 32 MiB layer of random bytes on
// top, so that a real enroot import takes long enough to be interrupted.
func (s *realStack) pushHeavy() {
	s.t.Helper()
	base, err := name.ParseReference(s.registry + "/opx/busybox:1")
	if err != nil {
		s.t.Fatal(err)
	}
	img, err := remote.Image(base)
	if err != nil {
		s.t.Fatal(err)
	}
	noise, err := random.Layer(32<<20, types.DockerLayer)
	if err != nil {
		s.t.Fatal(err)
	}
	heavy, err := mutate.AppendLayers(img, noise)
	if err != nil {
		s.t.Fatal(err)
	}
	ref, _ := name.ParseReference(s.registry + "/opx/heavy:1")
	if err := remote.Write(ref, heavy); err != nil {
		s.t.Fatal(err)
	}
}

// The fault-injection test extended to the import phase and to pyxis starting the
// container, on the real stack: SIGINT, SIGTERM or SIGKILL (then finalize, as the
// workflow's always-step does) while enroot imports or while the benchmark step starts.
// After each: no allocation left, no stage left, no partial squash in the cache and any
// squash there valid; then the same shard executes cleanly.
func TestRealStackFaultsDuringImport(t *testing.T) {
	s := newRealStack(t)
	s.pushHeavy()
	tl := s.testlists()
	ct := s.containers("opx/heavy:1")
	for _, phase := range []string{"import", "benchmark"} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(phase+"-"+sig.String(), func(t *testing.T) {
				root := filepath.Join(s.workdir, "shared-"+phase+"-"+fmt.Sprint(int(sig)))
				os.MkdirAll(root, 0o755)
				cfg := s.pyxisPlatform(root)
				m := filepath.Join(root, "m.json")
				r := run(s.cmd("", "plan", "--runner", "cluster:real-plain", "--backends", "cpu", "--testlists", "two", "--world-sizes", "1",
					"--run-id", "90", "--attempt", "1", "--source-sha", "abc", "--platform-config", cfg, "--testlist-dir", tl,
					"--containers", ct, "--out", m))
				if r.code != 0 {
					t.Fatalf("plan: %s", r.stderr)
				}
				id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(r.stdout)[1]
				execute := func(out string) *exec.Cmd {
					return s.cmd("", "execute", "--shard", id, "--run-id", "90", "--attempt", "1", "--source-sha", "abc", "--runner-name", "real",
						"--time-minutes", "10", "--cleanup-seconds", "30", "--manifest", m, "--platform-config", cfg, "--output", out)
				}
				if phase == "benchmark" { // the image is cached: the next run goes straight to pyxis
					if r := run(execute(filepath.Join(root, "warm"))); r.code != 0 {
						t.Fatalf("warm-up execute: %d %s", r.code, r.stderr)
					}
				}
				out := filepath.Join(root, "out")
				cmd := execute(out)
				var stdout strings.Builder
				cmd.Stdout = &stdout
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "phase "+phase, 60*time.Second, func() bool {
					return strings.Contains(stdout.String(), "[operatorx] phase="+phase)
				})
				if phase == "import" {
					time.Sleep(300 * time.Millisecond) // enroot is fetching and unpacking
				}
				cmd.Process.Signal(sig)
				cmd.Wait()
				if sig == syscall.SIGKILL {
					// the loopback Slurm tracks a step's processes by parentage
					// (proctrack/linuxproc): an enroot child orphaned by the SIGKILL can hold
					// the step until it finishes writing, so the job may take a while to end
					if r := run(s.cmd("", "finalize", "--output", out, "--cleanup-seconds", "180")); r.code != 0 {
						log, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
						lines := strings.Split(strings.TrimSpace(string(log)), "\n")
						c := exec.Command("scontrol", "show", "job", "-o")
						c.Env = s.env("")
						jobs, _ := c.CombinedOutput()
						t.Fatalf("finalize: %d %s\nlast cleanup.log line: %s\n%s", r.code, r.stderr, lines[len(lines)-1], jobs)
					}
				}
				if q := squeueOn(s); q != "" {
					t.Errorf("allocation left: %q", q)
				}
				// an import killed mid-way (srun's SIGKILL after KillWait) may leave its private
				// .<key>.partial-* directory: never a <key>.sqsh, and the next import of the
				// key removes it
				cache := filepath.Join(root, fmt.Sprintf(".operatorx-%d", os.Getuid()), "containers")
				squashes, _ := filepath.Glob(filepath.Join(cache, "*.sqsh"))
				for _, sq := range squashes {
					if err := image.Validate(t.Context(), sq, "", nil); err != nil {
						t.Errorf("an unusable squash is in the cache: %v", err)
					}
				}
				if stages, _ := filepath.Glob(filepath.Join(root, ".operatorx-*", "90-1-*")); len(stages) > 0 {
					t.Errorf("stage left behind: %v", stages)
				}
				if r := run(execute(filepath.Join(root, "again"))); r.code != 0 {
					t.Errorf("the next execute: exit %d %s", r.code, r.stderr)
				}
				if partials, _ := filepath.Glob(filepath.Join(cache, "*partial*")); len(partials) > 0 {
					t.Errorf("partial imports left after the next import: %v", partials)
				}
			})
		}
	}
}

// A shard under real pyxis as an unprivileged user (runuser, as a CI runner's account
// would run it): the import runs enroot's helpers with their file capabilities, and the
// h200 family's --container-remap-root and a plain family both start.
func TestRealStackAsAnotherUser(t *testing.T) {
	s := newRealStack(t)
	user, uid := testenv.OtherUser(t)
	shared := testenv.SharedDir(t)
	home := filepath.Join(shared, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, uid, -1)
	tl := filepath.Join(shared, "testlists")
	os.MkdirAll(tl, 0o755)
	b, _ := os.ReadFile(filepath.Join(s.testlists(), "quick.json"))
	os.WriteFile(filepath.Join(tl, "quick.json"), b, 0o644)
	ct := filepath.Join(shared, "containers.toml")
	os.WriteFile(ct, []byte("[nvidia.cpu]\nimage = \""+s.registry+"/opx/busybox:1\"\n"), 0o644)
	cfg := filepath.Join(shared, "platforms.json")
	entry := func(fam string) string {
		return `{"cluster": "real_8x", "family": "` + fam + `", "gpus_per_node": 8, "image_platform": "linux/amd64",
		  "operator": {"partition": "debug", "stage_dir": "` + home + `"}}`
	}
	os.WriteFile(cfg, []byte(`{"platforms": {"cluster:real-plain": `+entry("lab")+`, "cluster:real-h200": `+entry("h200")+`}}`), 0o644)
	for _, runner := range []string{"cluster:real-plain", "cluster:real-h200"} {
		t.Run(strings.TrimPrefix(runner, "cluster:"), func(t *testing.T) {
			m := filepath.Join(home, "m-"+strings.TrimPrefix(runner, "cluster:")+".json")
			out := filepath.Join(home, "out-"+strings.TrimPrefix(runner, "cluster:"))
			script := fmt.Sprintf(`%[1]s plan --runner %[2]s --backends cpu --testlists quick --world-sizes 1 --run-id 91 --attempt 1 --source-sha abc \
			  --platform-config %[3]s --testlist-dir %[4]s --containers %[5]s --out %[6]s > %[6]s.matrix &&
			  id=$(sed 's/.*"id":"\([^"]*\)".*/\1/' %[6]s.matrix) &&
			  exec %[1]s execute --shard "$id" --run-id 91 --attempt 1 --source-sha abc --runner-name real --time-minutes 10 \
			  --cleanup-seconds 30 --manifest %[6]s --platform-config %[3]s --output %[7]s`, s.opx, runner, cfg, tl, ct, m, out)
			c := exec.Command("runuser", "-u", user, "--", "env", "HOME="+home, "sh", "-c", script)
			c.Env = s.env("")
			r := run(c)
			if r.code != 0 {
				b, _ := os.ReadFile(filepath.Join(out, "benchmark.log"))
				i, _ := os.ReadFile(filepath.Join(out, "import.log"))
				t.Fatalf("as %s: exit %d %s\nimport.log:\n%s\nbenchmark.log:\n%s", user, r.code, r.stderr, i, b)
			}
			if got := rows(t, out); got["ok"] != 1 || got["unsupported"] != 1 {
				t.Errorf("rows %v", got)
			}
		})
	}
}

// The containers.toml digest fallback end to end: the image's tag is gone from the registry
// (a pruned nightly), plan takes the table's digest and an import URI by digest, and the
// real enroot imports it by that digest.
func TestRealStackContainersDigestFallback(t *testing.T) {
	s := newRealStack(t)
	base, _ := name.ParseReference(s.registry + "/opx/busybox:1")
	bb, err := remote.Image(base)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.ParseReference(s.registry + "/opx/pruned:1")
	if err := remote.Write(tag, bb); err != nil {
		t.Fatal(err)
	}
	d := s.digest("opx/pruned:1")
	if err := remote.Delete(tag); err != nil {
		t.Fatalf("deleting the tag: %v", err)
	}
	root := filepath.Join(s.workdir, "shared")
	os.MkdirAll(root, 0o755)
	cfg := s.pyxisPlatform(root)
	ct := filepath.Join(s.workdir, "pruned.toml")
	os.WriteFile(ct, []byte("[nvidia.cpu]\nimage = \""+s.registry+"/opx/pruned:1\"\ndigest = \""+d+"\"\n"), 0o644)
	m := filepath.Join(s.workdir, "m-pruned.json")
	r := run(s.cmd("", "plan", "--runner", "cluster:real-plain", "--backends", "cpu", "--testlists", "quick", "--world-sizes", "1",
		"--run-id", "92", "--attempt", "1", "--source-sha", "abc", "--platform-config", cfg, "--testlist-dir", s.testlists(),
		"--containers", ct, "--out", m))
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	b, _ := os.ReadFile(m)
	if !strings.Contains(string(b), `"import_uri": "docker://`+s.registry+`#opx/pruned:`+d+`"`) {
		t.Fatalf("the plan does not import by the table's digest:\n%s", b)
	}
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(r.stdout)[1]
	out := filepath.Join(s.workdir, "out-pruned")
	r = run(s.cmd("", "execute", "--shard", id, "--run-id", "92", "--attempt", "1", "--source-sha", "abc", "--runner-name", "real",
		"--time-minutes", "10", "--cleanup-seconds", "30", "--manifest", m, "--platform-config", cfg, "--output", out))
	if r.code != 0 {
		i, _ := os.ReadFile(filepath.Join(out, "import.log"))
		t.Fatalf("execute: exit %d %s\n%s", r.code, r.stderr, i)
	}
	if got := rows(t, out); got["ok"] != 1 {
		t.Errorf("rows %v", got)
	}
}
