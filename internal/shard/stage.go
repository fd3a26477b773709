// The stage: the private directory on shared storage an execution runs from — its base,
// and the checks that it is ours to use and to remove.

package shard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/safe"
)

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

// StageBase is where execute stages a shard: SharedBase, except that the local runner
// stages under the system temp dir unless its entry says otherwise.
func StageBase(st platform.Storage, runner platform.Runner, getenv func(string) string) (string, error) {
	base, err := SharedBase(st, runner, getenv)
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

// SharedBase is the seed's shared_base (docs/compat-spec.md §3.8): <first usable root>/.operatorx-<uid>.
func SharedBase(st platform.Storage, runner platform.Runner, getenv func(string) string) (string, error) {
	var roots []string
	switch {
	case st.StageDir != "":
		roots = []string{st.StageDir}
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
	case st.SquashDir != "":
		roots = []string{filepath.Dir(st.SquashDir)}
	default:
		if st.Roots == nil {
			return "", fmt.Errorf("platform entry for %s has no operator.storage_roots, stage_dir or squash_dir", runner.Label)
		}
		roots = st.Roots
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
	return "", fmt.Errorf("no writable shared storage root configured for this runner (%s)", strings.Join(why, "; ")) // ci.py's words, and why
}

// writable is the seed's os.access(W_OK | X_OK): it asks the kernel, creating nothing
// (execute --dry-run must not touch storage).
func writable(dir string) bool {
	return syscall.Access(dir, 0o2|0o1) == nil
}

// checkBase returns the stage base with the symlinks above it resolved, after checking it
// is ours alone — a real directory, owned by us, no group or other bits (docs/compat-spec.md §6 step
// 7) — and that nobody else could swap it: every directory above it is owned by root or us
// and, when others may write it, sticky. create makes the base when it is missing (a dry
// run only checks one that is there).
func checkBase(base string, create bool) (string, error) {
	unsafe := func(err error) error { return fmt.Errorf("unsafe shared OperatorX stage directory %w", err) }
	if !filepath.IsAbs(base) {
		return "", fmt.Errorf("the stage base %s is not an absolute path", base)
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
			return "", err
		}
	}
	if up, err := filepath.EvalSymlinks(filepath.Dir(base)); err == nil {
		base = filepath.Join(up, filepath.Base(base))
	} else if create {
		return "", err
	}
	if err := files.CheckAncestors(base); err != nil && (create || !errors.Is(err, fs.ErrNotExist)) {
		return "", unsafe(err)
	}
	var err error
	if create {
		err = files.MkdirPrivate(base)
	} else if err = files.CheckPrivateDir(base); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		var ue *files.UntrustedError
		if errors.As(err, &ue) {
			return "", unsafe(err)
		}
		return "", err
	}
	return base, nil
}

// MountableStage checks that pyxis can mount a stage under base (beyond the seed): pyxis
// splits --container-mounts at ',' and each mount at ':', and rejects such a source at step
// launch — after the allocation and the import. execute, its dry run and doctor refuse it
// first. (The stage's own name is run id, attempt and shard id: plain names.)
func MountableStage(base string) error {
	if strings.ContainsAny(base, ":,") {
		return fmt.Errorf("the stage base %s holds ':' or ',', which pyxis cannot mount (--container-mounts); choose a storage root without them", safe.Text(base))
	}
	return nil
}
