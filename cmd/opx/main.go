// Command opx plans GPU operator benchmark sweeps and runs them on Slurm clusters.
package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/semianalysis/opx/internal/cli"
)

func main() {
	// opx's processes are short and allocate in bursts (whole manifests): collect only when
	// the heap nears a bound, not every few megabytes
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(1 << 30)
	if path := os.Getenv("OPX_CPUPROFILE"); path != "" { // for scripts/bench-*.sh
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	// not stopped: the process exits as soon as Main returns, and putting the signals
	// back (one locked-thread round trip each) would only delay that
	ctx, _ := cli.SignalContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := cli.Main(ctx, os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Getenv: os.Getenv, Environ: os.Environ,
	})
	pprof.StopCPUProfile()
	os.Exit(code)
}
