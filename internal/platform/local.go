package platform

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/proc"
)

// LoadConfig reads the platform config at path (the embedded one when path is ""), the
// local runner's GPUs counted on this machine when its entry is first read. name is the
// config's name as messages show it.
func LoadConfig(path string) (g *Registry, name string, err error) {
	src := catalog.Embedded("platforms.json")
	if path != "" {
		src = catalog.Disk(path)
	}
	g, err = Load(src, LocalDefaults{CountGPUs: localGPUs})
	return g, src.Name, err
}

// deviceTool runs a GPU tool for its stdout, bounded (a hung driver must not hang plan).
func deviceTool(argv ...string) (string, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return proc.Output(ctx, proc.Cmd{Argv: append([]string{path}, argv[1:]...), Stderr: io.Discard, Grace: time.Second})
}

// localGPUs counts this machine's devices for the local runner: nvidia-smi -L, then
// rocm-smi, else 1.
func localGPUs() int {
	if out, err := deviceTool("nvidia-smi", "-L"); err == nil {
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "GPU ") {
				n++
			}
		}
		if n > 0 {
			return n
		}
	}
	if out, err := deviceTool("rocm-smi", "--showid"); err == nil {
		seen := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "GPU[") {
				seen[l[:strings.Index(l, "]")+1]] = true
			}
		}
		if len(seen) > 0 {
			return len(seen)
		}
	}
	return 1
}

// LocalBackends is what the local runner can run on this machine, in words for plan and
// doctor: the cpu backend always (opx's own, in process); any other backend runs the
// OperatorX harness (python3 -m operatorx), so only where python3 imports it. missing is
// why it cannot ("" when it can). environ is the environment the ranks get (nil: this
// process's).
func LocalBackends(ctx context.Context, environ []string) (can string, missing string) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "cpu", "no python3 on PATH"
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var stderr strings.Builder
	_, err = proc.Output(ctx, proc.Cmd{Argv: []string{py, "-c", "import operatorx"}, Env: environ, Stderr: &stderr, Grace: time.Second})
	if err != nil {
		why := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(why, "\n"); i >= 0 {
			why = why[i+1:] // the exception's line: "ModuleNotFoundError: No module named 'operatorx'"
		}
		if why == "" {
			why = err.Error()
		}
		return "cpu", "python3 cannot import the OperatorX harness (" + why + ")"
	}
	return "cpu and the OperatorX harness's backends (vllm, torch, ...)", ""
}
