// opx run --ab-base SIDE --ab-head SIDE: the sides of a paired A/B, read and checked
// before anything is planned or allocated.

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
	"github.com/semianalysis/opx/internal/shard"
)

// abFlags are opx run's A/B flags as given.
type abFlags struct {
	base, head         string
	minPairs, maxPairs int
	threshold          float64
}

// abSideHelp is what a SIDE is, for --help and for the error that names a bad one.
const abSideHelp = "comma-separated tree=DIR (the harness tree staged as source/), commit=REV (that tree's repository at REV; needs tree), env=NAME=VALUE (repeatable: set for this side's ranks)"

// sides reads both sides; exported trees (commit=) are removed by cleanup. Neither flag
// given: no A/B.
func (f *abFlags) sides(ctx context.Context, changed func(string) bool) (a *shard.AB, cleanup func(), err error) {
	cleanup = func() {}
	if f.base == "" && f.head == "" {
		for _, name := range []string{"ab-min-pairs", "ab-max-pairs", "ab-threshold"} {
			if changed(name) {
				return nil, cleanup, &UsageError{fmt.Errorf("--%s is for an A/B: give --ab-base and --ab-head", name)}
			}
		}
		return nil, cleanup, nil
	}
	if f.base == "" || f.head == "" {
		return nil, cleanup, &UsageError{errors.New("an A/B needs both sides: give --ab-base SIDE and --ab-head SIDE (" + abSideHelp + ")")}
	}
	rules := ab.Defaults
	rules.MinPairs, rules.MaxPairs, rules.Threshold = f.minPairs, f.maxPairs, f.threshold/100
	switch {
	case f.minPairs < 8:
		return nil, cleanup, &UsageError{fmt.Errorf("--ab-min-pairs %d: at least 8 (fewer pairs cannot bound a ratio at 99%%)", f.minPairs)}
	case f.maxPairs < f.minPairs:
		return nil, cleanup, &UsageError{fmt.Errorf("--ab-max-pairs %d is below --ab-min-pairs %d", f.maxPairs, f.minPairs)}
	case !(f.threshold > 0) || f.threshold > 1000:
		return nil, cleanup, &UsageError{fmt.Errorf("--ab-threshold %v: a percentage above 0", f.threshold)}
	}
	var temps []string
	cleanup = func() {
		for _, d := range temps {
			os.RemoveAll(d)
		}
	}
	a = &shard.AB{Rules: rules}
	for _, s := range []struct {
		flag, spec string
		into       *shard.Side
	}{{"--ab-base", f.base, &a.Base}, {"--ab-head", f.head, &a.Head}} {
		side, temp, err := readSide(ctx, s.spec)
		if temp != "" {
			temps = append(temps, temp)
		}
		if err != nil {
			cleanup()
			return nil, func() {}, &UsageError{fmt.Errorf("%s %s: %w", s.flag, pytext.Repr(s.spec), err)}
		}
		*s.into = side
	}
	return a, cleanup, nil
}

// readSide reads one SIDE; temp is a directory it exported a commit into ("" if none).
func readSide(ctx context.Context, spec string) (side shard.Side, temp string, err error) {
	var tree, commit string
	var labels []string
	for _, part := range strings.Split(spec, ",") {
		key, val, ok := strings.Cut(part, "=")
		if !ok || val == "" {
			return side, "", fmt.Errorf("%s is not KEY=VALUE; a side is %s", pytext.Repr(part), abSideHelp)
		}
		switch key {
		case "tree":
			if tree != "" {
				return side, "", errors.New("tree= given twice")
			}
			tree = val
		case "commit":
			if commit != "" {
				return side, "", errors.New("commit= given twice")
			}
			commit = val
		case "env":
			name, v, ok := strings.Cut(val, "=")
			if !ok || !manifest.ValidEnv(name, v) {
				return side, "", fmt.Errorf("env=%s: give env=NAME=VALUE, NAME letters, digits and _ (not first a digit), VALUE without a NUL", val)
			}
			if slices.ContainsFunc(side.Env, func(kv [2]string) bool { return kv[0] == name }) {
				return side, "", fmt.Errorf("env=%s: %s is set twice on one side", val, name)
			}
			side.Env = append(side.Env, [2]string{name, v})
			labels = append(labels, val)
		default:
			return side, "", fmt.Errorf("unknown part %s; a side is %s", pytext.Repr(key), abSideHelp)
		}
	}
	if commit != "" && tree == "" {
		return side, "", errors.New("commit= needs tree= (the repository's directory whose harness it is)")
	}
	if tree != "" {
		fi, err := os.Stat(tree)
		if err != nil || !fi.IsDir() {
			return side, "", fmt.Errorf("tree=%s: no such directory", tree)
		}
		if side.Tree, err = filepath.Abs(tree); err != nil {
			return side, "", err
		}
		label := "tree " + tree
		if commit != "" {
			sha, dir, err := exportCommit(ctx, side.Tree, commit)
			if err != nil {
				return side, dir, err
			}
			side.Tree, temp = dir, dir
			label += " at " + sha[:min(12, len(sha))]
		}
		labels = append([]string{label}, labels...)
	}
	side.Label = strings.Join(labels, ", ")
	if side.Label == "" {
		side.Label = "as is"
	}
	return side, temp, nil
}

// exportCommit writes tree's repository at rev, the part under tree, into a new
// directory (git archive, then tar, which refuses members outside it): the side's harness
// as that commit has it, whatever the checkout holds.
func exportCommit(ctx context.Context, tree, rev string) (sha, dir string, err error) {
	top := tree
	git := func(args ...string) (string, error) {
		var errb strings.Builder
		out, err := proc.Output(ctx, proc.Cmd{Argv: append([]string{"git", "-C", top}, args...), Stderr: &errb})
		if err != nil {
			return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), cmp.Or(strings.TrimSpace(errb.String()), err.Error()))
		}
		return strings.TrimSpace(out), nil
	}
	if strings.HasPrefix(rev, "-") {
		return "", "", fmt.Errorf("commit=%s: not a revision", rev)
	}
	if sha, err = git("rev-parse", "--verify", "--end-of-options", rev+"^{commit}"); err != nil {
		return "", "", fmt.Errorf("commit=%s: %w", rev, err)
	}
	prefix, err := git("rev-parse", "--show-prefix")
	if err != nil {
		return "", "", err
	}
	if top, err = git("rev-parse", "--show-toplevel"); err != nil {
		return "", "", err
	}
	if _, err := git("cat-file", "-e", sha+":"+prefix); err != nil {
		return "", "", fmt.Errorf("tree=%s: commit %s has no such directory (%s)", tree, sha[:12], cmp.Or(prefix, "."))
	}
	if dir, err = os.MkdirTemp("", "opx-ab-tree-"); err != nil {
		return "", "", err
	}
	archive := filepath.Join(dir, ".opx-archive.tar")
	if _, err := git("archive", "--format=tar", "-o", archive, sha+":"+prefix); err != nil {
		return sha, dir, err
	}
	if err := proc.Run(ctx, proc.Cmd{Argv: []string{"tar", "-x", "-f", archive, "-C", dir}, Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		return sha, dir, fmt.Errorf("unpacking commit %s of %s: %w", sha, tree, err)
	}
	return sha, dir, os.Remove(archive)
}
