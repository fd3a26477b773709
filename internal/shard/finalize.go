package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
)

// Finalize is the seed's finalize (docs/seed-spec.md §9): cancel and confirm, copy results out of
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
	token := ""
	if ex != nil && byToken && ex.Cell.Runner != platform.Local { // the local runner allocates nothing
		token = ex.Token
		if token == "" {
			token = Token(ex.RunID, ex.Attempt, ex.ShardID())
		}
	}
	acct := beginCleanup(ctx, root)
	defer acct.done(func(a *manifest.Accounting) { a.End("cleanup", time.Now()) }) // failed or not
	if err := s.Cleanup(ctx, root, cleanupSeconds, token); err != nil {
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
	if _, err := os.Stat(filepath.Join(stage, "results")); err == nil {
		if err := copyTree(filepath.Join(stage, "results"), filepath.Join(root, "results")); err != nil {
			return fmt.Errorf("collecting results from %s: %w; retaining staged evidence", stage, err)
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

// checkStage checks, before anything is removed, that an execution's stage is one execute
// made: <canonical root>/.operatorx-<uid>/<run>-<attempt>-<shard>-XXXXXXXX, under a base
// that is this user's alone (not a symlink, owned by us, mode 0700), and itself a real
// directory when it is still there. A stage that fails any of these is kept.
func checkStage(ex *manifest.Execution) error {
	stage := ex.Stage
	base := filepath.Dir(stage)
	if !filepath.IsAbs(stage) || filepath.Clean(stage) != stage {
		return fmt.Errorf("stage %s is not a clean absolute path", safe.Text(stage))
	}
	if filepath.Base(base) != fmt.Sprintf(".operatorx-%d", os.Getuid()) ||
		!strings.HasPrefix(filepath.Base(stage), ex.RunID+"-"+ex.Attempt+"-"+ex.ShardID()+"-") {
		return fmt.Errorf("stage %s is not a stage of shard %s under .operatorx-%d", safe.Text(stage), ex.ShardID(), os.Getuid())
	}
	if up, err := filepath.EvalSymlinks(filepath.Dir(base)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nothing left to remove
		}
		return err
	} else if up != filepath.Dir(base) {
		return fmt.Errorf("stage %s lies below a symlink (%s resolves to %s)", stage, filepath.Dir(base), up)
	}
	if err := files.CheckPrivateDir(base); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if fi, err := os.Lstat(stage); err == nil && (!fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0) {
		return fmt.Errorf("stage %s is not a directory", stage)
	}
	return nil
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

// StageBase is where execute stages a shard: SharedBase, except that the local runner
// stages under the system temp dir unless its entry says otherwise.
func StageBase(profile *pyjson.Object, runner platform.Runner, getenv func(string) string) (string, error) {
	base, err := SharedBase(profile, runner, getenv)
	if runner.Label == platform.Local && err != nil {
		tmp := getenv("TMPDIR") // os.TempDir's rule, from the environment opx was given
		if tmp == "" {
			tmp = "/tmp"
		}
		if !filepath.IsAbs(tmp) {
			return "", fmt.Errorf("TMPDIR=%s is not an absolute path", safe.Text(tmp))
		}
		return filepath.Join(tmp, fmt.Sprintf(".operatorx-%d", os.Getuid())), nil
	}
	return base, err
}

// SharedBase is the seed's shared_base (docs/seed-spec.md §3.8): <first usable root>/.operatorx-<uid>.
func SharedBase(profile *pyjson.Object, runner platform.Runner, getenv func(string) string) (string, error) {
	var roots []string
	switch {
	case pyjson.Truthy(get(profile, "stage_dir")):
		s, _ := profile.String("stage_dir")
		roots = []string{s}
	case runner.AMD():
		rt := getenv("RUNNER_TEMP")
		if rt == "" {
			return "", errors.New("AMD staging requires the shared runner _work/_temp path (RUNNER_TEMP is not set)")
		}
		clean := filepath.Clean(rt)
		if !filepath.IsAbs(rt) || filepath.Base(clean) != "_temp" || filepath.Base(filepath.Dir(clean)) != "_work" {
			return "", errors.New("AMD staging requires the shared runner _work/_temp path")
		}
		roots = []string{filepath.Dir(filepath.Dir(clean))}
	case runner.Family == "b300":
		u, err := user.LookupId(strconv.Itoa(os.Getuid()))
		if err != nil {
			return "", fmt.Errorf("looking up this account's home: %w", err)
		}
		roots = []string{u.HomeDir}
	case pyjson.Truthy(get(profile, "squash_dir")):
		s, _ := profile.String("squash_dir")
		roots = []string{filepath.Dir(s)}
	default:
		v, ok := profile.Get("storage_roots")
		arr, isArr := v.([]pyjson.Value)
		if !ok || !isArr {
			return "", fmt.Errorf("platform entry for %s has no operator.storage_roots, stage_dir or squash_dir", runner.Label)
		}
		for _, r := range arr {
			if s, ok := r.(string); ok {
				roots = append(roots, s)
			}
		}
	}
	var why []string
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			// a relative root would stage wherever execute, finalize or the node happen to run
			return "", fmt.Errorf("platform entry for %s: storage root %s is not an absolute path", runner.Label, safe.Text(r))
		}
		fi, err := os.Stat(r)
		switch {
		case err != nil:
			why = append(why, safe.Text(r)+" does not exist")
		case !fi.IsDir():
			why = append(why, safe.Text(r)+" is not a directory")
		case !writable(r):
			why = append(why, safe.Text(r)+" is not writable by this user")
		default:
			return filepath.Join(r, fmt.Sprintf(".operatorx-%d", os.Getuid())), nil
		}
	}
	if len(why) == 0 {
		return "", errors.New("no writable shared storage root configured for this runner")
	}
	return "", fmt.Errorf("no writable shared storage root for this runner: %s", strings.Join(why, "; "))
}

func get(o *pyjson.Object, k string) pyjson.Value { v, _ := o.Get(k); return v }

// writable is the seed's os.access(W_OK | X_OK): it asks the kernel, creating nothing
// (execute --dry-run must not touch storage).
func writable(dir string) bool {
	return syscall.Access(dir, 0o2|0o1) == nil
}

// Recover is the seed's recover (docs/seed-spec.md §11): finalize every execution of run_id on this
// runner found under artifacts, after checking it belongs here. Beyond the seed it also
// recovers the local runner's executions (their stage base is StageBase's).
func Recover(ctx context.Context, s *Slurm, artifacts, runID string, runner platform.Runner, profile *pyjson.Object, getenv func(string) string, cleanupSeconds int) (int, error) {
	base, err := StageBase(profile, runner, getenv)
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
		ex, err := manifest.ReadExecution(ctx, path)
		if err != nil {
			return n, err
		}
		if ex.RunID != runID || ex.Cell.Runner != runner.Label {
			return n, errors.New("recovery artifact does not match requested run/runner")
		}
		parent := filepath.Dir(ex.Stage)
		if r, err := filepath.EvalSymlinks(parent); err == nil {
			parent = r
		}
		if parent != base {
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
