// Cleanup: cancel a shard's allocations and confirm they are gone, whatever ended it.

package shard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/pyjson"
)

// resendEvery is how often scancel is sent again to a job squeue still lists after a
// scancel that the controller accepted (a failed scancel is sent again at every poll).
const resendEvery = 10 * time.Second

// Cleanup is the seed's cleanup (docs/seed-spec.md §3.7): scancel each allocation, then poll the
// user's job list until it is gone, logging every poll to cleanup.log. The poll interval
// starts at 10 ms and grows by half up to 1 s (the seed sleeps a fixed second), bounded by
// timeout. Then the jobs tagged with token that allocation.log did not name (execute died
// before salloc's answer reached the log) are cancelled the same way.
//
// Beyond the seed: a scancel that fails (the controller is down or restarting) is sent again
// at every poll until one is accepted, and again every 10 s while the job is still listed,
// so a controller that comes back within the timeout still gets the cancel; a squeue that
// fails counts as "unknown", never as "gone". Failed scancels and token lookups are logged
// to cleanup.log too (the seed's lines are unchanged).
func (s *Slurm) Cleanup(ctx context.Context, root string, timeout int, token string) error {
	if timeout <= 0 {
		return errors.New("cleanup timeout must be positive")
	}
	jobs := AllocationIDs(root)
	for _, job := range jobs {
		if err := s.release(ctx, root, job, timeout); err != nil {
			return err
		}
	}
	if token == "" {
		return nil
	}
	ids, err := s.jobsByToken(ctx, root, token, s.now().Add(time.Duration(timeout)*time.Second))
	if err != nil {
		return fmt.Errorf("looking for allocations tagged %s: %v; retaining staged evidence", token, err)
	}
	for _, id := range ids {
		if !slices.Contains(jobs, id) {
			if err := s.release(ctx, root, id, timeout); err != nil {
				return err
			}
		}
	}
	return nil
}

// release cancels one job and polls until squeue, answering, no longer lists it.
func (s *Slurm) release(ctx context.Context, root, job string, timeout int) error {
	logLine := func(line string) error { return appendFile(filepath.Join(root, "cleanup.log"), line) }
	sent := time.Time{} // when a scancel was last accepted; zero: none yet
	cancelJob := func() error {
		rc, errOut := s.scancel(ctx, job)
		if rc == 0 {
			sent = s.now()
			return nil
		}
		return logLine(fmt.Sprintf("scancel job=%s rc=%d error=%s\n", job, rc, pyjson.Repr(errOut)))
	}
	if err := cancelJob(); err != nil {
		return err
	}
	deadline := s.now().Add(time.Duration(timeout) * time.Second)
	interval := 10 * time.Millisecond
	for s.now().Before(deadline) {
		rc, out, errOut := s.squeue(ctx, "%A")
		if err := logLine(fmt.Sprintf("job=%s rc=%d active=%s error=%s\n", job, rc, pyjson.Repr(out), pyjson.Repr(errOut))); err != nil {
			return err
		}
		if rc == 0 && !slices.Contains(strings.Fields(out), job) {
			return nil
		}
		s.sleep(interval)
		interval = min(interval*3/2, time.Second)
		if sent.IsZero() || s.now().Sub(sent) >= resendEvery {
			if err := cancelJob(); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("allocation %s did not terminate; retaining staged evidence", job)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
