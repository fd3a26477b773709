package shard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/proc"
)

// localJob stands in for the Slurm job id on the local runner (MASTER_PORT, the ranks'
// private caches): "local-<pid>", so that two local executions at once never share a
// rank's cache directory.
var localJob = "local-" + strconv.Itoa(os.Getpid())

// runLocal is the local runner (decisions §1): no Slurm, no container — one process per
// rank running the staged `opx rank`, with the same environment contract, stage and
// output layout as a Slurm shard, plus the variables srun would have set (SLURM_PROCID,
// SLURM_LOCALID, SLURM_JOB_ID=local) so rank's checks hold. If one rank fails the others
// are stopped, as srun --kill-on-bad-exit does.
func (r *execution) runLocal(ctx context.Context) error {
	if len(r.cell.ExcludeNodes) > 0 {
		fmt.Fprintf(r.o.Stderr, "opx: warning: shard %s asks to avoid %s, but the local runner is this one machine: its cases are measured here again\n",
			r.cell.ID, strings.Join(r.cell.ExcludeNodes, ", "))
	}
	r.phase = "benchmark"
	fmt.Fprintf(r.o.Stdout, "[operatorx] phase=benchmark\n")
	r.record(func(a *manifest.Accounting) { // the ranks hold this machine's devices while they run
		t := time.Now().UTC()
		a.GrantedAt, a.Job = &t, localJob
		a.Begin("benchmark", t)
	})
	logPath := filepath.Join(r.root, "benchmark.log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	limit := time.Duration(BenchmarkLimit(r.o.TimeMinutes)) * time.Second
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("benchmark ran past its %s limit", limit))
	defer cancel()
	base, _ := r.benchEnv(localJob)
	bin := filepath.Join(r.stage, "bin", "opx")
	// the machine is claimed while the shard measures: another opx run measuring here at
	// the same time is warned of, and each run's fingerprints name the other (the report
	// marks the rows measured while it did)
	fpBefore, fpAfter := r.fingerprintStep(localJob, "before"), r.fingerprintStep(localJob, "after")
	if claim, err := fingerprint.StartMeasuring(r.o.Environ, fmt.Sprintf("run %s, shard %s, output %s", r.o.RunID, r.cell.ID, r.root)); err == nil {
		defer claim.Close()
		fpBefore.Env = proc.SetEnv(append([]string(nil), fpBefore.Env...), fingerprint.SelfEnv, claim.Name())
		fpAfter.Env = proc.SetEnv(append([]string(nil), fpAfter.Env...), fingerprint.SelfEnv, claim.Name())
		for _, o := range fingerprint.OthersMeasuring(r.o.Environ, claim.Name()) {
			fmt.Fprintf(r.o.Stderr, "opx: warning: shard %s: another opx run is measuring on this machine (%s): both share its CPU, and the report marks the rows measured meanwhile\n", r.cell.ID, o)
		}
		if busy := fingerprint.LoadNow(r.o.Environ); busy != "" {
			fmt.Fprintf(r.o.Stderr, "opx: warning: shard %s: this machine is busy (%s): its rows are marked measured under contention, and compare and the history gate ask for them again\n", r.cell.ID, busy)
		}
	}
	r.fingerprint(ctx, fpBefore)
	defer func() {
		if ctx.Err() == nil {
			r.fingerprint(ctx, fpAfter)
		}
	}()
	if r.o.AB != nil {
		err = r.abRounds(ctx, time.Now().Add(limit), func(ctx context.Context, vars [][2]string, limit time.Duration) error {
			env := append([]string(nil), base...)
			for _, kv := range vars {
				env = proc.SetEnv(env, kv[0], kv[1])
			}
			ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("benchmark ran past its limit"))
			defer cancel()
			return r.localRanks(ctx, env, bin, log, logPath)
		})
	} else {
		err = r.localRanks(ctx, base, bin, log, logPath)
	}
	r.benchEnd = time.Now()
	r.record(func(a *manifest.Accounting) {
		t := r.benchEnd.UTC()
		a.End("benchmark", t)
		a.ReleasedAt = &t
	})
	return err
}

// localRanks runs the shard's ranks here, one process each, with env (the rank variables
// added), and stops the others when one fails, as srun --kill-on-bad-exit does: the first
// rank's failure, or what ended ctx (its limit).
func (r *execution) localRanks(ctx context.Context, base []string, bin string, log *os.File, logPath string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, r.ws)
	var wg sync.WaitGroup
	for rank := 0; rank < int(r.ws); rank++ {
		env := append([]string(nil), base...)
		for _, kv := range [][2]string{{"SLURM_PROCID", strconv.Itoa(rank)}, {"SLURM_LOCALID", strconv.Itoa(rank)},
			{"SLURM_JOB_ID", localJob}, {"RANK", strconv.Itoa(rank)}, {"LOCAL_RANK", strconv.Itoa(rank)}} {
			env = proc.SetEnv(env, kv[0], kv[1])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[rank] = proc.Run(ctx, proc.Cmd{Argv: []string{bin, "rank"}, Env: env, Dir: os.TempDir(), Stdout: log, Stderr: log, Grace: 10 * time.Second})
			if errs[rank] != nil {
				cancel() // --kill-on-bad-exit
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil && context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.Canceled) {
		return context.Cause(ctx)
	}
	for rank, err := range errs {
		if err != nil {
			var exitErr *proc.ExitError
			if errors.As(err, &exitErr) {
				b, _ := os.ReadFile(logPath)
				if len(b) > 16000 {
					b = b[len(b)-16000:]
				}
				fmt.Fprintln(r.o.Stderr, string(b))
				return fmt.Errorf("benchmark step failed: rank %d: %w (log: %s)", rank, exitErr, logPath)
			}
			return err
		}
	}
	return nil
}
