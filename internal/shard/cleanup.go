// Package shard owns a shard's life on a Slurm submit host (seed-spec §3.5–§3.8, §6, §9,
// §11): the stage on shared storage, the allocation, the steps run on it, and the cleanup
// that always follows — cancel the allocation and confirm it is gone, collect every result
// row, remove the stage — idempotently, from execute, finalize or recover.
package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pyjson"
)

var allocationRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:Granted|Pending) job allocation ([0-9]+)`)
})

// AllocationIDs is the seed's allocation_ids: every job id named in allocation.log, unique,
// sorted as strings.
func AllocationIDs(root string) []string {
	b, err := os.ReadFile(filepath.Join(root, "allocation.log"))
	if err != nil {
		return []string{}
	}
	seen := map[string]bool{}
	out := []string{}
	for _, m := range allocationRE().FindAllSubmatch(b, -1) {
		if id := string(m[1]); !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Token tags an allocation with (run, attempt, shard) so that cleanup finds it even when
// execute died before allocation.log named the job (beyond the seed).
func Token(runID, attempt, shardID string) string {
	sum := sha256.Sum256([]byte("opx:" + runID + ":" + attempt + ":" + shardID))
	return "opx-" + hex.EncodeToString(sum[:])[:24]
}

// Slurm runs the Slurm client commands; tests point Bin at a directory of recording fakes
// only where a real Slurm cannot answer.
type Slurm struct {
	UID   int
	Sleep func(time.Duration) // nil: time.Sleep
	Now   func() time.Time    // nil: time.Now
	Env   []string            // nil: inherit
}

func (s *Slurm) sleep(d time.Duration) {
	if s.Sleep != nil {
		s.Sleep(d)
		return
	}
	time.Sleep(d)
}

func (s *Slurm) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// jobsByToken lists the user's jobs whose comment is token.
func (s *Slurm) jobsByToken(ctx context.Context, token string) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := proc.Output(ctx, proc.Cmd{Argv: []string{"squeue", "-h", "-u", strconv.Itoa(s.UID), "-o", "%A %k"}, Env: s.Env, Grace: time.Second})
	if err != nil {
		return nil
	}
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == token {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// Cleanup is the seed's cleanup (seed-spec §3.7): scancel each allocation, then poll the
// user's job list until it is gone, logging every poll to cleanup.log. The poll interval
// starts at 10 ms and grows by half up to 1 s (the seed sleeps a fixed second), bounded by
// timeout. Jobs tagged with token are cancelled too.
func (s *Slurm) Cleanup(ctx context.Context, root string, timeout int, token string) error {
	if timeout <= 0 {
		return errors.New("cleanup timeout must be positive")
	}
	jobs := AllocationIDs(root)
	if token != "" {
		for _, id := range s.jobsByToken(ctx, token) {
			if !contains(jobs, id) {
				jobs = append(jobs, id)
			}
		}
	}
	for _, job := range jobs {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_ = proc.Run(sctx, proc.Cmd{Argv: []string{"scancel", job}, Env: s.Env, Grace: time.Second})
		cancel()
		deadline := s.now().Add(time.Duration(timeout) * time.Second)
		interval := 10 * time.Millisecond
		released := false
		for s.now().Before(deadline) {
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var stdout, stderr strings.Builder
			err := proc.Run(qctx, proc.Cmd{Argv: []string{"squeue", "-h", "-u", strconv.Itoa(s.UID), "-o", "%A"},
				Env: s.Env, Stdout: &stdout, Stderr: &stderr, Grace: time.Second})
			cancel()
			rc := 0
			var ee *proc.ExitError
			if errors.As(err, &ee) {
				rc = ee.Code
			} else if err != nil {
				rc = 127
				stderr.WriteString(err.Error())
			}
			line := fmt.Sprintf("job=%s rc=%d active=%s error=%s\n", job, rc, pyjson.Repr(stdout.String()), pyjson.Repr(stderr.String()))
			if err := appendFile(filepath.Join(root, "cleanup.log"), line); err != nil {
				return err
			}
			if rc == 0 && !contains(strings.Fields(stdout.String()), job) {
				released = true
				break
			}
			s.sleep(interval)
			interval = min(interval*3/2, time.Second)
		}
		if !released {
			return fmt.Errorf("allocation %s did not terminate; retaining staged evidence", job)
		}
	}
	return nil
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
