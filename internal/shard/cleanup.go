// Cleanup: cancel a shard's allocations and confirm they are gone, whatever ended it.

package shard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/safe"
)

// resendEvery is how often scancel is sent again to a job squeue still lists after a
// scancel that the controller accepted (a failed scancel is sent again at every poll).
const resendEvery = 10 * time.Second

// Cleanup is the seed's cleanup (docs/compat-spec.md §3.7): scancel each allocation, then poll the
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
//
// Only what is provably this execution's is cancelled. Execute's own cleanup (search
// false) cancels the jobs allocation.log names: its own salloc, in the output directory it
// just made, wrote them. Every later cleanup — finalize, recover, run --resume, on an
// artifact that may be stale or tampered — cancels a job only when this user's job list
// shows it carrying owner, the tag (--comment) the execution's allocation was given: one
// that carries another is reported on Slurm.Warn and in cleanup.log and left alone, one not
// listed is already gone (scancel by id could reach another user's job); and it cancels
// every job carrying owner that allocation.log does not name (execute died before salloc's
// answer reached the log).
func (s *Slurm) Cleanup(ctx context.Context, root string, timeout int, owner string, search bool) error {
	if timeout <= 0 {
		return errors.New("cleanup timeout must be positive")
	}
	log, err := readAllocationLog(ctx, root)
	if err != nil {
		return fmt.Errorf("reading the jobs allocation.log names: %w; retaining staged evidence", err)
	}
	ours := log.jobs
	if search {
		if ours, err = s.provablyOurs(ctx, root, log, owner, timeout); err != nil {
			return err
		}
	}
	for _, job := range ours {
		if err := s.release(ctx, root, job, timeout); err != nil {
			return err
		}
	}
	return nil
}

// provablyOurs is the jobs to cancel for an execution tagged owner: those allocation.log
// names that this user's job list shows with that tag, then any other job with it.
func (s *Slurm) provablyOurs(ctx context.Context, root string, log allocationLog, owner string, timeout int) ([]string, error) {
	jobs := log.jobs
	if len(jobs) == 0 && owner == "" {
		return nil, nil
	}
	logLine := func(line string) error { return appendFile(filepath.Join(root, "cleanup.log"), line) }
	listed, err := s.jobComments(ctx, root, s.now().Add(time.Duration(timeout)*time.Second))
	if err != nil {
		if why, none := log.nothingGranted(); none && ctx.Err() == nil {
			// the controller cannot be asked, but there is nothing to ask it about
			return nil, logLine(fmt.Sprintf("no job to cancel: %s\n", why))
		}
		return nil, fmt.Errorf("listing this user's jobs to tell which are this execution's: %w; retaining staged evidence", err)
	}
	var ours []string
	for _, job := range jobs {
		comment, ok := listed[job]
		switch {
		case !ok:
			if err := logLine(fmt.Sprintf("job=%s not listed: already gone\n", job)); err != nil {
				return nil, err
			}
		case owner != "" && comment == owner:
			ours = append(ours, job)
		default:
			msg := fmt.Sprintf("job %s, named in allocation.log, is not this execution's (its comment is %s, not %s): left alone", job, pytext.Repr(comment), pytext.Repr(owner))
			s.warnf("%s", msg)
			if err := logLine(msg + "\n"); err != nil {
				return nil, err
			}
		}
	}
	if owner != "" {
		for _, id := range slices.Sorted(maps.Keys(listed)) {
			if listed[id] == owner && !slices.Contains(ours, id) {
				ours = append(ours, id)
			}
		}
	}
	return ours, nil
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
		return logLine(fmt.Sprintf("scancel job=%s rc=%d error=%s\n", job, rc, pytext.Repr(errOut)))
	}
	if err := cancelJob(); err != nil {
		return err
	}
	deadline := s.now().Add(time.Duration(timeout) * time.Second)
	interval := 10 * time.Millisecond
	said := s.now() // a wait is said every 10 s: never a silent loop
	for s.now().Before(deadline) {
		if ctx.Err() != nil {
			_ = logLine(fmt.Sprintf("job=%s not confirmed gone: stopped (%v)\n", job, context.Cause(ctx)))
			return fmt.Errorf("stopped (%w) before allocation %s was confirmed gone; retaining staged evidence (opx finalize releases it)", context.Cause(ctx), job)
		}
		rc, out, errOut := s.squeue(ctx, "%A")
		if err := logLine(fmt.Sprintf("job=%s rc=%d active=%s error=%s\n", job, rc, pytext.Repr(out), pytext.Repr(errOut))); err != nil {
			return err
		}
		if rc == 0 && !slices.Contains(strings.Fields(out), job) {
			return nil
		}
		if now := s.now(); now.Sub(said) >= 10*time.Second {
			said = now
			why := "squeue still lists it"
			if rc != 0 {
				why = "squeue does not answer: " + safe.OneLine(errOut)
			}
			s.warnf("waiting for allocation %s to end (%s); %.0f s left", job, why, deadline.Sub(now).Seconds())
		}
		s.sleep(ctx, interval)
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

// sallocRefused is what salloc prints when the controller refused or never received its
// request, so that no job was created ("Job submit/allocate failed: Unable to contact
// slurm controller (connect failure)"; older releases said "Failed to allocate
// resources").
var sallocRefused = []string{"salloc: error: Job submit/allocate failed:", "salloc: error: Failed to allocate resources:"}

// nothingGranted says, from allocation.log alone (for when the controller cannot be
// asked), whether the execution provably never had a job: execute creates the log before
// it starts salloc, so no log means salloc never ran; a log that names no job and holds
// salloc's refusal of the request means the controller created none (salloc names a job
// as soon as one exists: "Pending job allocation N").
func (l allocationLog) nothingGranted() (string, bool) {
	switch {
	case !l.present:
		return "salloc never started (no allocation.log)", true
	case len(l.jobs) > 0:
		return "", false
	}
	for _, refused := range sallocRefused {
		if i := bytes.Index(l.text, []byte(refused)); i >= 0 {
			line, _, _ := bytes.Cut(l.text[i:], []byte("\n"))
			return "salloc's request created no job (allocation.log: " + safe.OneLine(string(line)) + ")", true
		}
	}
	return "", false
}
