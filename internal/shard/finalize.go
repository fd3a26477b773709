package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
)

// Finalize is the seed's finalize (docs/compat-spec.md §9): cancel and confirm, copy results out of
// the stage, remove the stage. A missing root is a no-op. Idempotent.
func Finalize(ctx context.Context, s *Slurm, root string, cleanupSeconds int) error {
	return finalize(ctx, s, root, cleanupSeconds, true)
}

// finalize is Finalize; byToken also cancels jobs tagged with the shard's token (execute
// skips that lookup when its own salloc returned and allocation.log names the job).
func finalize(ctx context.Context, s *Slurm, root string, cleanupSeconds int, byToken bool) error {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	execPath := filepath.Join(root, "execution.json")
	var ex *manifest.Execution
	if _, err := os.Stat(execPath); err == nil {
		if ex, err = manifest.ReadExecution(ctx, execPath); err != nil {
			return err
		}
	}
	// the allocation's tag: what is not tagged with it is not ours to cancel (the local
	// runner allocates nothing)
	owner := ""
	if ex != nil && ex.Cell.Runner != platform.Local {
		owner = ex.Token
		if owner == "" {
			owner = Token(ex.RunID, ex.Attempt, ex.ShardID())
		}
	}
	acct := beginCleanup(ctx, root)
	defer acct.done(func(a *manifest.Accounting) { a.End("cleanup", time.Now()) }) // failed or not
	if err := s.Cleanup(ctx, root, cleanupSeconds, owner, byToken); err != nil {
		return err
	}
	if ex == nil {
		return nil
	}
	if ex.Cell.Runner != platform.Local {
		acct.released() // Cleanup confirmed the allocation gone
	}
	stage := ex.Stage
	if err := checkStage(ex); err != nil {
		return fmt.Errorf("refusing unsafe stage cleanup: %w", err)
	}
	if _, err := os.Lstat(stage); errors.Is(err, fs.ErrNotExist) {
		return nil // already removed
	}
	if ex.Cell.Runner == platform.Local {
		// the local runner's ranks are processes here: they end before their stage does
		if err := stopRanks(ctx, stage, cleanupSeconds, s.sleep); err != nil {
			return err
		}
	}
	acct.released()
	// results/ a directory: an A/B cut short leaves it a link to the round that was
	// running, whose rows are one side's, not the shard's (its rounds are kept in ab/)
	if fi, err := os.Lstat(filepath.Join(stage, "results")); err == nil && fi.IsDir() {
		if err := copyTree(filepath.Join(stage, "results"), filepath.Join(root, "results")); err != nil {
			return fmt.Errorf("collecting results from %s: %w; retaining staged evidence", stage, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(stage, "ab")); err == nil && fi.IsDir() {
		if err := copyTree(filepath.Join(stage, "ab"), filepath.Join(root, "ab")); err != nil {
			return fmt.Errorf("collecting the A/B rounds from %s: %w; retaining staged evidence", stage, err)
		}
	}
	return os.RemoveAll(stage)
}

// cleanupRecord is finalize's part of accounting.json: the cleanup phase, and the release
// it confirmed. An execution without the file (or with one unreadable) is left as it is.
type cleanupRecord struct {
	path string
	a    *manifest.Accounting
}

func beginCleanup(ctx context.Context, root string) *cleanupRecord {
	path := filepath.Join(root, manifest.AccountingFile)
	a, err := manifest.ReadAccounting(ctx, path)
	if err != nil || a == nil {
		return &cleanupRecord{}
	}
	if a.ReleasedAt != nil && slices.ContainsFunc(a.Phases, func(p manifest.Phase) bool { return p.Name == "cleanup" && p.End != nil }) {
		return &cleanupRecord{} // finalized before: a second finalize changes nothing
	}
	c := &cleanupRecord{path: path, a: a}
	c.done(func(a *manifest.Accounting) { a.Begin("cleanup", time.Now()) })
	return c
}

// released records that the allocation is gone (Cleanup confirmed it, or the local ranks
// were stopped), unless an earlier record says when it went.
func (c *cleanupRecord) released() {
	c.done(func(a *manifest.Accounting) {
		if a.GrantedAt != nil && a.ReleasedAt == nil {
			t := time.Now().UTC()
			a.ReleasedAt = &t
		}
	})
}

func (c *cleanupRecord) done(change func(*manifest.Accounting)) {
	if c.a == nil {
		return
	}
	change(c.a)
	_ = c.a.Write(c.path) // best effort: the cost's record, never a reason to keep a stage
}

// copyTree merges src into dst, overwriting files; symlinks are not followed or copied.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".opx-copy"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// Recover is the seed's recover (docs/compat-spec.md §11): finalize every execution of run_id on this
// runner found under artifacts, after checking it belongs here. Beyond the seed it also
// recovers the local runner's executions (their stage base is StageBase's).
func Recover(ctx context.Context, s *Slurm, artifacts, runID string, runner platform.Runner, st platform.Storage, getenv func(string) string, cleanupSeconds int) (int, error) {
	base, err := StageBase(st, runner, getenv)
	if err != nil {
		return 0, err
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(base)); err == nil {
		base = filepath.Join(r, filepath.Base(base))
	}
	var found []string
	err = filepath.WalkDir(artifacts, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "execution.json" {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading artifacts: %w", err)
	}
	n := 0
	for _, path := range found {
		// ci.py's order: whether it is this run's and runner's first, then whether its
		// stage is this user's, then its layout
		if rid, label, stage, ok := manifest.ExecutionOwner(ctx, path); ok {
			if rid != runID || label != runner.Label {
				return n, errors.New("recovery artifact does not match requested run/runner")
			}
			if stage == "" && hasStatus(path) {
				continue // it never started (opx run recorded its setup failure): nothing to recover
			}
			if !inBase(stage, base) {
				return n, errors.New("recovery stage does not belong to this runner/user")
			}
		}
		ex, err := manifest.ReadExecution(ctx, path)
		if err != nil {
			return n, err
		}
		if ex.RunID != runID || ex.Cell.Runner != runner.Label {
			return n, errors.New("recovery artifact does not match requested run/runner")
		}
		if !inBase(ex.Stage, base) {
			return n, errors.New("recovery stage does not belong to this runner/user")
		}
		if err := Finalize(ctx, s, filepath.Dir(path), cleanupSeconds); err != nil {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, errors.New("no execution artifacts found to recover")
	}
	return n, nil
}

// inBase is whether a stage lies directly in the user's stage base (links resolved).
func inBase(stage, base string) bool {
	parent := filepath.Dir(stage)
	if r, err := filepath.EvalSymlinks(parent); err == nil {
		parent = r
	}
	return stage != "" && parent == base
}

// hasStatus is whether the execution beside path ended (its status.json is there).
func hasStatus(path string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(path), manifest.StatusFile))
	return err == nil
}
