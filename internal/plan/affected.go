package plan

// What a change touches (opx plan --affected-by BASE..HEAD): the files a range of commits
// changed (git diff --name-only), mapped to the cases they can move — a testlist file to
// its cases, an entry of containers.toml to the cases on that image, a harness path the
// platform config maps (platform.HarnessPath) to its backends' cases or their smoke lists
// — and anything else to every case (the safe default: a build file, a file opx knows
// nothing of).

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/catalog"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
)

// Affected is what a range of commits touches, each with why.
type Affected struct {
	Range string
	// All is why every case is affected ("" when not every case is): the first file
	// that maps to no narrower set.
	All string
	// Testlists are the testlists whose files changed; Images the containers.toml
	// entries (vendor.backend) whose image or digest changed.
	Testlists map[string]string
	Images    map[string]string
	// Harness are the backends whose harness paths changed (backend -> why), and Smoke
	// the testlists those paths name (nil when one of them names none: every testlist).
	Harness  map[string]string
	Smoke    []string
	smokeAll bool // a changed harness path named no testlist
	// Files are how many files the range changed.
	Files int
}

// RangeError is an --affected-by that is not BASE..HEAD (a usage error).
type RangeError struct{ Range string }

func (e *RangeError) Error() string {
	return fmt.Sprintf("--affected-by %q: give BASE..HEAD (two commits, branches or tags)", e.Range)
}

// rangeSpec is BASE..HEAD or BASE...HEAD: two revisions git can name.
var rangeSpec = regexp.MustCompile(`^([A-Za-z0-9_./~^@{}-]+?)\.\.\.?([A-Za-z0-9_./~^@{}-]+)$`)

// AffectedBy reads what the commits of rng (BASE..HEAD, compared from their merge base as
// a pull request is) changed in the git repository at repo. testlistDir and containers
// are the plan's (relative to repo when given; else a file testlists/NAME.json anywhere
// is a testlist and a file containers.toml anywhere the images).
func AffectedBy(ctx context.Context, repo, rng, testlistDir, containers string, harness []platform.HarnessPath) (*Affected, error) {
	m := rangeSpec.FindStringSubmatch(rng)
	if m == nil || strings.HasPrefix(m[1], "-") || strings.HasPrefix(m[2], "-") {
		return nil, &RangeError{rng}
	}
	base, head := m[1], m[2]
	git := func(args ...string) ([]byte, error) {
		var out bytes.Buffer
		err := proc.Run(ctx, proc.Cmd{Argv: append([]string{"git", "-C", repo}, args...), Stdout: &out})
		if err != nil {
			hint := ""
			if strings.Contains(err.Error(), "merge base") { // git's words on a shallow clone
				hint = " (a shallow clone has no merge base: fetch the base's history, e.g. actions/checkout's fetch-depth: 0)"
			}
			return nil, fmt.Errorf("--affected-by %s: git %s: %w%s", rng, strings.Join(args, " "), err, hint)
		}
		return out.Bytes(), nil
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	root := strings.TrimSpace(string(top))
	if testlistDir, err = inRepo(root, testlistDir); err != nil {
		return nil, err
	}
	if containers, err = inRepo(root, containers); err != nil {
		return nil, err
	}
	// from the merge base, as a pull request's diff is
	out, err := git("diff", "--name-only", "-z", "--no-renames", base+"..."+head, "--")
	if err != nil {
		return nil, err
	}
	a := &Affected{Range: rng, Testlists: map[string]string{}, Images: map[string]string{}, Harness: map[string]string{}}
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		a.Files++
		dir, name := path.Split(f)
		switch {
		case strings.HasSuffix(name, ".json") && isTestlistDir(dir, testlistDir):
			a.Testlists[strings.TrimSuffix(name, ".json")] = f + " changed"
		case isContainers(f, containers):
			if err := a.images(git, base, head, f); err != nil {
				return nil, err
			}
		case a.harness(f, harness):
		case a.All == "":
			a.All = f + " changed (no narrower mapping: every case)"
		}
	}
	return a, nil
}

// harness records the harness paths that hold f (every one of them), and is whether any did.
func (a *Affected) harness(f string, paths []platform.HarnessPath) bool {
	held := false
	for _, h := range paths {
		if !h.Holds(f) {
			continue
		}
		held = true
		for _, b := range h.Backends {
			if _, ok := a.Harness[b]; !ok {
				a.Harness[b] = f + " changed (harness path " + h.Path + ")"
			}
		}
		if len(h.Testlists) == 0 {
			a.smokeAll = true
		}
		for _, t := range h.Testlists {
			if !slices.Contains(a.Smoke, t) {
				a.Smoke = append(a.Smoke, t)
			}
		}
	}
	return held
}

// isTestlistDir is whether dir (a changed file's, relative to the repository's top, with
// its trailing slash) holds the plan's testlists (rel: theirs, relative to the top).
func isTestlistDir(dir, rel string) bool {
	if rel == "" {
		return dir == "testlists/" || strings.HasSuffix(dir, "/testlists/")
	}
	return path.Clean(dir) == rel
}

func isContainers(f, rel string) bool {
	if rel == "" {
		return path.Base(f) == "containers.toml"
	}
	return f == rel
}

// inRepo is p (as the plan reads it: relative to the working directory, links followed)
// relative to the repository's top level root, as git names its files; "" stays "". A
// path outside the repository maps no file of it: no change selects it ("-").
func inRepo(root, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "-", nil
	}
	return filepath.ToSlash(rel), nil
}

// images adds the entries of containers.toml at f that differ between base's merge base
// with head and head; a file added or removed touches every case.
func (a *Affected) images(git func(...string) ([]byte, error), base, head, f string) error {
	mb, err := git("merge-base", base, head)
	if err != nil {
		return err
	}
	read := func(rev string) (catalog.Containers, bool, error) {
		b, err := git("show", rev+":"+f)
		if err != nil {
			return nil, false, nil // not in that commit
		}
		c, err := catalog.ParseContainers(catalog.Disk(f+" at "+rev), b)
		return c, true, err
	}
	before, hadBefore, err := read(strings.TrimSpace(string(mb)))
	if err != nil {
		return err
	}
	after, hasAfter, err := read(head)
	if err != nil {
		return err
	}
	if !hadBefore || !hasAfter {
		if a.All == "" {
			a.All = f + " added or removed (every case)"
		}
		return nil
	}
	for _, vendor := range slices.Sorted(maps.Keys(after)) {
		for _, backend := range slices.Sorted(maps.Keys(after[vendor])) {
			if before[vendor][backend] != after[vendor][backend] {
				a.Images[vendor+"."+backend] = fmt.Sprintf("%s [%s.%s] changed", f, vendor, backend)
			}
		}
	}
	for vendor, bs := range before {
		for backend := range bs {
			if _, ok := after[vendor][backend]; !ok && a.All == "" {
				a.All = fmt.Sprintf("%s [%s.%s] removed (every case)", f, vendor, backend)
			}
		}
	}
	return nil
}

// Narrow is the selection a plan keeps of what it was given: every case when All, or
// when both testlists and backends changed (a union of a testlist's cases and a backend's
// is no one selection: every case, said so); the testlists changed; or the backends whose
// image changed for vendor (the runner's) or whose harness paths changed — in the
// testlists those paths name, when every one of them names some and no image changed
// (their smoke lists, kept of those given; every testlist given when none is). Each line
// says why; none kept is an empty selection.
func (a *Affected) Narrow(testlists, backends []string, vendor string) (keepT, keepB []string, why []string) {
	var bs []string // in the order given: the planner's choices follow it
	image := false
	for _, b := range backends {
		w, ok := a.Images[vendor+"."+b]
		if ok {
			image = true
		} else {
			w, ok = a.Harness[b]
		}
		if ok {
			bs = append(bs, b)
			why = append(why, fmt.Sprintf("backend %s: %s", b, w))
		}
	}
	var tls []string
	for _, t := range testlists {
		if w, ok := a.Testlists[t]; ok {
			tls = append(tls, t)
			why = append(why, fmt.Sprintf("testlist %s: %s", t, w))
		}
	}
	switch {
	case a.All != "":
		return testlists, backends, []string{"every case: " + a.All}
	case len(tls) > 0 && len(bs) > 0:
		return testlists, backends, append(why, "every case: both a testlist and a backend's image or harness changed")
	case len(tls) > 0:
		return tls, backends, why
	case len(bs) > 0:
		if image || a.smokeAll || len(a.Smoke) == 0 {
			return testlists, bs, why
		}
		var smoke []string
		for _, t := range testlists {
			if slices.Contains(a.Smoke, t) {
				smoke = append(smoke, t)
			}
		}
		if len(smoke) == 0 {
			return testlists, bs, append(why, fmt.Sprintf("the harness paths' testlists (%s) are not in the selection: every testlist given", strings.Join(a.Smoke, ", ")))
		}
		return smoke, bs, append(why, "their smoke testlists: "+strings.Join(smoke, ", "))
	}
	return nil, nil, nil
}
