// Command opx plans GPU operator benchmark sweeps and runs them on Slurm clusters.
package main

import (
	"context"
	"os"
	"syscall"

	"github.com/semianalysis/opx/internal/cli"
)

func main() {
	setHeapFloor(heapFloor)
	ctx, stop := cli.SignalContext(context.Background(), os.Stderr, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := cli.Main(ctx, os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Getenv: os.Getenv, Environ: os.Environ,
	})
	stop()
	os.Exit(code)
}
