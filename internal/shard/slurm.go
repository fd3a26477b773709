// The Slurm client: the commands opx runs against the controller (squeue, scancel), the
// job states it reports, and the ids and tag that name an execution's allocation.

package shard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/safe"
)

var allocationRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:Granted|Pending) job allocation ([0-9]+)`)
})

// AllocationIDs is the seed's allocation_ids: every job id named in allocation.log, unique,
// sorted as strings; none when the log cannot be read (what the log says, for status.json
// and messages: cleanup reads it with readAllocationLog, which says when it cannot).
func AllocationIDs(ctx context.Context, root string) []string {
	l, _ := readAllocationLog(ctx, root)
	return l.jobs
}

// allocationLog is what an execution's allocation.log says: whether it is there, its
// text, and the job ids it names (unique, sorted as strings).
type allocationLog struct {
	present bool
	text    []byte
	jobs    []string
}

// readAllocationLog reads allocation.log, and says why it could not: not a regular file (a
// FIFO, a link to a device or to nothing), or ctx ended. A log that is not there names no
// job.
func readAllocationLog(ctx context.Context, root string) (allocationLog, error) {
	l := allocationLog{jobs: []string{}}
	b, err := files.ReadRegular(ctx, filepath.Join(root, "allocation.log"), files.MaxInput)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	l.present, l.text = true, b
	seen := map[string]bool{}
	for _, m := range allocationRE().FindAllSubmatch(b, -1) {
		if id := string(m[1]); !seen[id] {
			seen[id] = true
			l.jobs = append(l.jobs, id)
		}
	}
	sort.Strings(l.jobs)
	return l, nil
}

// Token is the part of an allocation's tag that names (run, attempt, shard): cleanup finds
// the allocation by its tag even when execute died before allocation.log named the job
// (beyond the seed). An execution.json without a "token" (written by opx before tokens
// were unique) is cleaned up by this tag alone.
func Token(runID, attempt, shardID string) string {
	sum := sha256.Sum256([]byte("opx:" + runID + ":" + attempt + ":" + shardID))
	return "opx-" + hex.EncodeToString(sum[:])[:24]
}

// tokenNonceLen is the length of the random suffix that makes each execution's tag its own.
const tokenNonceLen = 8

// NewToken is the tag of one execution: Token and a random suffix, so two executions of
// the same shard (two `opx run`s with one run id, a retry while the old one is still
// cleaning up) never cancel each other's allocation.
func NewToken(runID, attempt, shardID string) (string, error) {
	var b [tokenNonceLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return Token(runID, attempt, shardID) + "-" + hex.EncodeToString(b[:]), nil
}

// Slurm runs the Slurm client commands; tests point Bin at a directory of recording fakes
// only where a real Slurm cannot answer.
type Slurm struct {
	UID   int
	Sleep func(time.Duration) // nil: time.Sleep
	Now   func() time.Time    // nil: time.Now
	Env   []string            // nil: inherit
	Warn  io.Writer           // where a job left alone is reported (nil: nowhere but cleanup.log)
}

func (s *Slurm) warnf(format string, args ...any) {
	if s.Warn != nil {
		fmt.Fprintf(s.Warn, "opx: "+format+"\n", args...)
	}
}

// sleep waits d, or until ctx ends.
func (s *Slurm) sleep(ctx context.Context, d time.Duration) {
	if s.Sleep != nil {
		s.Sleep(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (s *Slurm) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// scrubbedEnv is the environment of opx's own squeue and scancel calls: s.Env (or this
// process's) without the SQUEUE_* and SCANCEL_* input variables, which would change which
// jobs squeue lists (SQUEUE_STATES, SQUEUE_FORMAT, ...) and which scancel cancels
// (SCANCEL_STATE, SCANCEL_USER, ...), so that "released" could be claimed for a running job.
func (s *Slurm) scrubbedEnv() []string {
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SQUEUE_") && !strings.HasPrefix(kv, "SCANCEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// squeue runs `squeue -h -u <uid> -o format` and returns its exit status (127 when it could
// not run), stdout and stderr.
func (s *Slurm) squeue(ctx context.Context, format string) (int, string, string) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stdout, stderr strings.Builder
	err := proc.Run(qctx, proc.Cmd{Argv: []string{"squeue", "-h", "-u", strconv.Itoa(s.UID), "-o", format},
		Env: s.scrubbedEnv(), Stdout: &stdout, Stderr: &stderr, Grace: time.Second})
	return exitStatus(err, &stderr), stdout.String(), stderr.String()
}

// scancel sends `scancel job` and returns its exit status and stderr.
func (s *Slurm) scancel(ctx context.Context, job string) (int, string) {
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var stderr strings.Builder
	err := proc.Run(sctx, proc.Cmd{Argv: []string{"scancel", job}, Env: s.scrubbedEnv(), Stderr: &stderr, Grace: time.Second})
	return exitStatus(err, &stderr), stderr.String()
}

func exitStatus(err error, stderr *strings.Builder) int {
	var ee *proc.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Code >= 0:
		return ee.Code
	}
	stderr.WriteString(err.Error())
	return 127
}

// jobComments lists this user's jobs with their comments (the tag opx gives each
// allocation): id -> comment. A squeue that fails is asked again until deadline, each
// failure logged to cleanup.log.
func (s *Slurm) jobComments(ctx context.Context, root string, deadline time.Time) (map[string]string, error) {
	interval := 10 * time.Millisecond
	said := s.now() // a wait is said every 10 s: never a silent loop
	for {
		rc, out, errOut := s.squeue(ctx, "%A %k")
		if rc == 0 {
			jobs := map[string]string{}
			for _, line := range strings.Split(out, "\n") {
				id, comment, _ := strings.Cut(strings.TrimSpace(line), " ")
				if id != "" {
					jobs[id] = strings.TrimSpace(comment)
				}
			}
			return jobs, nil
		}
		line := fmt.Sprintf("jobs rc=%d error=%s\n", rc, pytext.Repr(errOut))
		if err := appendFile(filepath.Join(root, "cleanup.log"), line); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped (%w) before squeue could list this user's jobs", context.Cause(ctx))
		}
		if !s.now().Before(deadline) {
			return nil, fmt.Errorf("squeue could not list this user's jobs (exit %d: %s)", rc, strings.TrimSpace(errOut))
		}
		if now := s.now(); now.Sub(said) >= 10*time.Second {
			said = now
			s.warnf("waiting for the Slurm controller to list this user's jobs before cancelling any (squeue: %s); %.0f s left",
				safe.OneLine(errOut), deadline.Sub(now).Seconds())
		}
		s.sleep(ctx, interval)
		interval = min(interval*3/2, time.Second)
	}
}

// jobStates names how an allocation that ended on its own ended, in the words a user acts on.
var jobStates = map[string]string{
	"CANCELLED":     "it was cancelled (scancel, or the workflow was cancelled)",
	"TIMEOUT":       "it reached its time limit",
	"NODE_FAIL":     "its node failed",
	"PREEMPTED":     "it was preempted",
	"BOOT_FAIL":     "its node failed to boot",
	"DEADLINE":      "it reached its deadline",
	"OUT_OF_MEMORY": "it ran out of memory",
	"FAILED":        "it failed",
	"COMPLETED":     "it completed",
}

// ParseJobState reads JobState= from `scontrol show job -o` output ("" when absent).
func ParseJobState(out string) string {
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			return v
		}
	}
	return ""
}

// EndedEarly says why an allocation that opx has not yet cancelled is no longer running,
// given its scontrol state ("" when the controller no longer knows the job); nil while it
// runs. Only RUNNING counts as running: a COMPLETING job is ending although nobody asked
// it to (checkRunning waits for its final state first).
func EndedEarly(job, state string) error {
	switch state {
	case "RUNNING":
		return nil
	case "COMPLETING":
		return fmt.Errorf("allocation %s ended before the step finished: it is ending (JobState=COMPLETING)", job)
	case "":
		return fmt.Errorf("allocation %s ended before the step finished: Slurm no longer knows the job", job)
	}
	why, ok := jobStates[state]
	if !ok {
		why = "it is " + state
	}
	return fmt.Errorf("allocation %s ended before the step finished: %s (JobState=%s)", job, why, state)
}

// checkRunning asks the controller, after a step on job returned, whether the allocation is
// still running, as it must be until opx cancels it: a step that ended because its job
// was cancelled, timed out or lost its node is a failure, whatever srun's exit status
// (srun can exit 0 after "Timed out waiting for job step to complete"). A controller that
// does not answer within a few tries is an error too: the step's end cannot be vouched for.
func (s *Slurm) checkRunning(ctx context.Context, job string) error {
	const (
		tries       = 5                      // a controller that does not answer
		poll        = 200 * time.Millisecond // while the job completes: its final state lasts MinJobAge
		completeFor = 30 * time.Second       // how long a COMPLETING job is watched
	)
	var last string
	failed, completing := 0, false
	deadline := s.now().Add(completeFor)
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var stdout, stderr strings.Builder
		err := proc.Run(sctx, proc.Cmd{Argv: []string{"scontrol", "show", "job", "-o", job}, Env: s.scrubbedEnv(),
			Stdout: &stdout, Stderr: &stderr, Grace: time.Second})
		cancel()
		switch {
		case err == nil:
			state := ParseJobState(stdout.String())
			if state != "COMPLETING" || !s.now().Before(deadline) {
				return EndedEarly(job, state)
			}
			completing = true // a job being cancelled completes first; its final state says why
			s.sleep(ctx, poll)
			continue
		case strings.Contains(stderr.String(), "Invalid job id"):
			if completing {
				return EndedEarly(job, "COMPLETING") // it finished ending and was purged before we saw how
			}
			return EndedEarly(job, "")
		}
		last = strings.TrimSpace(stderr.String() + " " + err.Error())
		if failed++; failed >= tries || ctx.Err() != nil {
			return fmt.Errorf("could not confirm allocation %s was still running after the step: %s", job, last)
		}
		s.sleep(ctx, time.Duration(failed)*500*time.Millisecond)
	}
}

// Reachable says, within seconds, whether this host can ask the Slurm controller for an
// allocation: the SLURM_CONF it is given must be a readable file (Slurm's own clients
// retry a missing one for a minute), and `scontrol ping` must find the controller up
// (salloc retries one that does not answer for minutes). Its error is in the words of the
// file system or the controller.
func (s *Slurm) Reachable(ctx context.Context) error {
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if conf, ok := strings.CutPrefix(kv, "SLURM_CONF="); ok && conf != "" {
			f, err := os.Open(conf)
			if err == nil {
				var fi os.FileInfo
				if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
					err = errors.New("not a regular file")
				}
				f.Close()
			}
			if err != nil {
				return fmt.Errorf("SLURM_CONF=%s cannot be read: %w", conf, err)
			}
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out strings.Builder
	err := proc.Run(pctx, proc.Cmd{Argv: []string{"scontrol", "ping"}, Env: s.scrubbedEnv(), Stdout: &out, Stderr: &out, Grace: time.Second})
	said, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	switch {
	case pctx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("the Slurm controller did not answer scontrol ping within 15 s")
	case err != nil || strings.Contains(said, "DOWN"):
		if said == "" && err != nil {
			said = err.Error()
		}
		return fmt.Errorf("the Slurm controller does not answer (scontrol ping: %s)", safe.OneLine(said))
	}
	return nil
}
