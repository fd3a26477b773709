package shard

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/semianalysis/opx/internal/files"
)

// Ranks that run on this host (the local runner) are what an allocation is on Slurm: the
// stage must outlive them. They are found by their environment — every rank and the
// harness it starts carry OPX_STAGE=<stage> — so no pid file can go stale or lie.

// liveRanks lists this user's processes on this host whose environment names stage.
func liveRanks(stage string) []int {
	want := []byte("OPX_STAGE=" + stage + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if fi, err := os.Stat(p); err != nil || files.UID(fi) != os.Geteuid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err == nil && (bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopRanks is the local runner's cancel-and-confirm: SIGTERM to every live rank of stage,
// then wait for them to end (SIGKILL after half the timeout), at most timeout seconds.
// finalize removes a local stage only after this returns nil.
func stopRanks(ctx context.Context, stage string, timeout int, sleep func(context.Context, time.Duration)) error {
	pids := liveRanks(stage)
	if len(pids) == 0 {
		return nil
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	killAt := time.Now().Add(time.Duration(timeout) * time.Second / 2)
	interval := 10 * time.Millisecond
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sleep(ctx, interval)
		interval = min(interval*3/2, time.Second)
		if pids = liveRanks(stage); len(pids) == 0 {
			return nil
		}
		if time.Now().After(killAt) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return fmt.Errorf("ranks %v still run in stage %s; retaining staged evidence", pids, stage)
}
