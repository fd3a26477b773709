// Package image is `opx import`: an image brought into the shared squashfs cache once per key,
// under a lock, checked and published atomically.
//
// It is `opx import`, the compute-node half of a shard (docs/compat-spec.md §7): bring one
// image into the shared squashfs cache exactly once per (image, digest, platform) key, under
// a per-key lock, with enroot in private scratch directories, and publish it atomically.
//
// Beyond the seed: a cache entry is checked whole enough to catch truncation before it is
// reused or published (decisions §7 — `unsquashfs -s` reads only the superblock and accepts
// a truncated file), a damaged entry or a stale .partial is replaced, and waiting for the
// lock honours cancellation.
package image

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/pytext"
)

// Options are import's flags and surroundings.
type Options struct {
	Cache, Image, Digest, URI, ImagePlatform string
	// Machine is the host's machine name (uname -m); "" asks the kernel.
	Machine string
	// Environ is the child environment's base (nil: this process's).
	Environ []string
	// Resolver re-resolves a tag after the import (the tag-moved check).
	Resolver interface {
		Digest(ctx context.Context, image string) string
	}
	Enroot, Unsquashfs string // default "enroot", "unsquashfs" on PATH
	Stdout, Stderr     io.Writer
	// LockPoll is how often a waiter retries the lock (default 100 ms).
	LockPoll time.Duration
}

// Result says what an import did.
type Result struct {
	Squash   string
	Imported bool   // false: a valid cache entry was reused
	Replaced string // why an existing entry was replaced ("" if none was)
}

// HostMachine is the kernel's machine name (uname -m), e.g. x86_64 or aarch64.
func HostMachine() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Machine {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// MachineMatches is the seed's host check: linux/amd64 runs on x86_64 or amd64 hosts,
// linux/arm64 on aarch64 or arm64.
func MachineMatches(imagePlatform, machine string) bool {
	m := strings.ToLower(machine)
	switch imagePlatform {
	case "linux/amd64":
		return m == "x86_64" || m == "amd64"
	case "linux/arm64":
		return m == "aarch64" || m == "arm64"
	}
	return false
}

// Run imports o.Image into o.Cache, or reuses the valid cache entry.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := checkInputs(o); err != nil {
		return Result{}, err
	}
	key := manifest.ImageKey(o.Image, o.Digest, o.ImagePlatform)
	res := Result{Squash: filepath.Join(o.Cache, key+".sqsh")}
	unlock, err := lockEntry(ctx, o, key)
	if err != nil {
		return res, err
	}
	defer unlock()
	if o.Unsquashfs == "" {
		o.Unsquashfs = "unsquashfs"
	}
	if done, err := checkCached(ctx, o, &res); done || err != nil {
		return res, err
	}
	if err := removeStalePartials(o.Cache, key); err != nil {
		return res, err
	}
	if err := importInto(ctx, o, key, res.Squash); err != nil {
		return res, err
	}
	res.Imported = true
	return res, nil
}

// checkInputs is what is checked before anything is created (docs/compat-spec.md §7 step 1), and
// the cache directory: made when missing, refused when others could replace its entries.
func checkInputs(o Options) error {
	machine := o.Machine
	if machine == "" {
		machine = HostMachine()
	}
	if !MachineMatches(o.ImagePlatform, machine) {
		return errors.New("image platform does not match the import host")
	}
	if o.Image == "" || o.Digest == "" {
		return errors.New("import needs --image and --digest")
	}
	if !manifest.ValidDigest(o.Digest) {
		return fmt.Errorf("--digest %s is not a sha256:<64 hex> manifest digest", pytext.Repr(o.Digest))
	}
	if err := os.MkdirAll(o.Cache, 0o700); err != nil {
		return err
	}
	// the cache may be shared with other users: nobody else may be able to replace what
	// opx puts there (docs/compat-spec.md §7 beyond the seed)
	if err := files.CheckSharedDir(o.Cache); err != nil {
		return fmt.Errorf("image cache %w", err)
	}
	return nil
}

// lockEntry takes the entry's lock, waiting for another import of the same image.
func lockEntry(ctx context.Context, o Options, key string) (unlock func(), err error) {
	// O_NOFOLLOW: a lock planted as a symlink is refused, never followed to create its
	// target; 0644 so that users sharing the cache can all take it
	lock := flock.New(filepath.Join(o.Cache, key+".lock"), flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW), flock.SetPermissions(0o644))
	symlink := fmt.Errorf("image lock %s is a symlink; not following it (remove it)", lock.Path())
	if fi, err := os.Lstat(lock.Path()); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, symlink
	}
	poll := o.LockPoll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	locked, err := lock.TryLockContext(ctx, poll)
	if err != nil || !locked {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for the image lock %s: %w", lock.Path(), context.Cause(ctx))
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, symlink
		}
		return nil, fmt.Errorf("locking %s: %w", lock.Path(), err)
	}
	return func() { lock.Unlock() }, nil
}

// checkCached looks at the entry already in the cache: done when it is valid; a damaged
// one is removed (and res says why), one that cannot be checked is kept and an error.
func checkCached(ctx context.Context, o Options, res *Result) (done bool, err error) {
	squash := res.Squash
	fi, err := os.Lstat(squash)
	if err != nil {
		return false, nil
	}
	// an entry someone else could have written is never run as this user's image
	if err := files.CheckTrustedFile(squash, fi); err != nil {
		return false, fmt.Errorf("cache entry %w: remove it, or use a cache of your own", err)
	}
	verr := Validate(ctx, squash, o.Unsquashfs, o.Environ)
	if verr == nil {
		return true, nil
	}
	var damaged *DamagedError
	if !errors.As(verr, &damaged) {
		// the check could not finish (interrupted, unsquashfs missing): the entry may
		// well be good, so it stays
		return false, fmt.Errorf("could not check cache entry %s (%w); keeping it", squash, verr)
	}
	res.Replaced = verr.Error()
	fmt.Fprintf(stderr(o), "opx import: cache entry %s is damaged (%v); importing it again\n", squash, verr)
	return false, os.Remove(squash)
}

// importInto runs enroot into a directory of this import's own, which nobody else can
// enter, checks the squash it made and the digest it came from, and renames it into place.
func importInto(ctx context.Context, o Options, key, squash string) error {
	work, err := os.MkdirTemp(o.Cache, "."+key+".partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	partial := filepath.Join(work, key+".sqsh")
	uri := o.URI
	if uri == "" {
		if uri, err = TagURI(o.Image); err != nil {
			return err
		}
	}
	if err := enrootImport(ctx, o, partial, uri); err != nil {
		return err
	}
	if err := Validate(ctx, partial, o.Unsquashfs, o.Environ); err != nil {
		return fmt.Errorf("enroot produced an unusable squash for %s: %w", o.Image, err)
	}
	// A tag import is checked against the planned digest; an import that went by digest
	// (a pinned image, or the containers.toml digest fallback whose URI names it) cannot
	// have moved.
	if manifest.PinnedDigest(o.Image) == "" && !strings.Contains(uri, o.Digest) {
		if o.Resolver == nil || o.Resolver.Digest(ctx, o.Image) != o.Digest {
			return errors.New("image tag moved or digest verification failed; dispatch again")
		}
	}
	return os.Rename(partial, squash)
}

// removeStalePartials removes what killed imports of key left (they cannot be running:
// the caller holds key's lock): this user's <key>.partial files (opx before 0.x wrote
// there) and .<key>.partial-* directories. Another user's are left alone.
func removeStalePartials(cache, key string) error {
	stale, _ := filepath.Glob(filepath.Join(cache, "."+key+".partial-*"))
	stale = append(stale, filepath.Join(cache, key+".partial"))
	for _, p := range stale {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if files.UID(fi) != os.Geteuid() {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// TagURI is the enroot URI of an image reference parsed as Docker parses it
// (go-containerregistry's name): a first component with a "." or a ":", or "localhost",
// is the registry host; otherwise Docker Hub (registry-1.docker.io, "library/" for a
// one-part name); no tag means latest; a digest reference imports by digest in the
// "#repo:sha256:…" form that enroot 3.5 and 4.x both take. The seed's registry_reference
// sent localhost:5000/busybox:1 to Docker Hub and split "ubuntu" into "library/" and
// tag "ubuntu" (docs/compat-spec.md §16.4).
func TagURI(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", pytext.Repr(image), err)
	}
	host := ref.Context().RegistryStr()
	if host == name.DefaultRegistry {
		host = "registry-1.docker.io"
	}
	return fmt.Sprintf("docker://%s#%s:%s", host, ref.Context().RepositoryStr(), ref.Identifier()), nil
}

func stderr(o Options) io.Writer {
	if o.Stderr == nil {
		return io.Discard
	}
	return o.Stderr
}

// enrootImport runs `enroot import -o partial uri` in private scratch directories that are
// removed afterwards, whatever happens.
func enrootImport(ctx context.Context, o Options, partial, uri string) error {
	scratch, err := os.MkdirTemp("", "operatorx-enroot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	env := o.Environ
	if env == nil {
		env = os.Environ()
	}
	env = append([]string(nil), env...)
	env = proc.SetEnv(env, "TMPDIR", scratch)
	dirs := [][2]string{{"ENROOT_TEMP_PATH", "temp"}, {"ENROOT_DATA_PATH", "data"}, {"ENROOT_RUNTIME_PATH", "runtime"}}
	if !hasEnv(env, "ENROOT_CACHE_PATH") {
		dirs = append(dirs, [2]string{"ENROOT_CACHE_PATH", "cache"})
	}
	for _, d := range dirs {
		p := filepath.Join(scratch, d[1])
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		env = proc.SetEnv(env, d[0], p)
	}
	enroot := o.Enroot
	if enroot == "" {
		enroot = "enroot"
	}
	err = proc.Run(ctx, proc.Cmd{Argv: []string{enroot, "import", "-o", partial, uri}, Env: env, Stdout: o.Stdout, Stderr: o.Stderr})
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("enroot import of %s failed: %w", uri, err)
	}
	return nil
}

func hasEnv(env []string, k string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	return false
}

// squashfs superblock (little endian): magic at 0, version major at 28, bytes_used at 40.
const (
	superblockSize = 96
	squashMagic    = 0x73717368 // "hsqs"
)

// DamagedError is Validate's verdict that a squash file is unusable (as opposed to a check
// that could not be completed: interrupted, unsquashfs missing), which alone lets import
// delete a cache entry.
type DamagedError struct{ Err error }

func (e *DamagedError) Error() string { return e.Err.Error() }
func (e *DamagedError) Unwrap() error { return e.Err }

func damaged(format string, a ...any) error { return &DamagedError{fmt.Errorf(format, a...)} }

// Validate checks a squash file: a squashfs 4 superblock, a file at least as long as the
// superblock says the filesystem is (this is what catches truncation), and the seed's
// `unsquashfs -s`. A *DamagedError says the file is unusable; any other error says the
// check did not finish.
func Validate(ctx context.Context, path, unsquashfs string, env []string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return damaged("%s is not a regular file", path)
	}
	var sb [superblockSize]byte
	if _, err := io.ReadFull(f, sb[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return damaged("%s has no squashfs superblock (%d bytes)", path, fi.Size())
		}
		return err
	}
	if binary.LittleEndian.Uint32(sb[0:]) != squashMagic {
		return damaged("%s is not a squashfs file", path)
	}
	if v := binary.LittleEndian.Uint16(sb[28:]); v != 4 {
		return damaged("%s is squashfs version %d, not 4", path, v)
	}
	if used := binary.LittleEndian.Uint64(sb[40:]); uint64(fi.Size()) < used {
		return damaged("%s is truncated: %d of %d bytes", path, fi.Size(), used)
	}
	if unsquashfs == "" {
		unsquashfs = "unsquashfs"
	}
	var out strings.Builder
	err = proc.Run(ctx, proc.Cmd{Argv: []string{unsquashfs, "-s", path}, Env: env, Stdout: io.Discard, Stderr: &out})
	var ee *proc.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("checking %s: %w", path, context.Cause(ctx))
	case errors.As(err, &ee) && ee.Code > 0:
		return damaged("unsquashfs -s %s: %v %s", path, err, strings.TrimSpace(out.String()))
	}
	// not started (missing), or killed by a signal from outside
	return fmt.Errorf("unsquashfs -s %s: %w", path, err)
}
