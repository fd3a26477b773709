package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/semianalysis/opx/internal/pyjson"
)

// opx runs as root on shared hosts, next to other users. A path opx did not create itself
// in this invocation is trusted only when nobody else could have made or changed it: it is
// not a symlink, it is owned by this user (or by root, whom every user trusts), and nobody
// else may write it. The helpers here are the one place those rules live.

// Owner is a path's owner and mode, for messages.
func Owner(fi fs.FileInfo) string {
	return fmt.Sprintf("owner uid %d, mode %04o", UID(fi), fi.Mode().Perm()|stickyBits(fi))
}

// Inode is a file's inode number (0 where the system gives none).
func Inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func stickyBits(fi fs.FileInfo) fs.FileMode {
	if fi.Mode()&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// UID is the owner of a path opx stat'ed (-1 when the file system does not say).
func UID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// UntrustedError says why a path that opx did not create is not used.
type UntrustedError struct {
	Path, Why string
}

func (e *UntrustedError) Error() string { return e.Path + ": " + e.Why }

// CheckPrivateDir checks that path is a directory of this user's alone: a real directory
// (not a symlink), owned by the effective user, with no group or other permission bits.
func CheckPrivateDir(path string) error {
	return checkUserDir(path, dirRule{perm: 0o077, symlink: "is a symlink, not a directory of this user's",
		other: "belongs to another user (%s); remove it or ask its owner to", open: "is open to other users (%s); chmod 700 it"})
}

// CheckOwnDir checks a directory opx will write into that it did not create (opx run's
// --out, new and empty or resumed): a real directory (not a symlink), owned by the
// effective user, not writable by group or others — no other user can plant a link in it
// (a shards link to a directory of root's, say) while the run writes there.
func CheckOwnDir(path string) error {
	return checkUserDir(path, dirRule{perm: 0o022, symlink: "is a symlink, not a directory of this user's; name the directory itself",
		other: "belongs to another user (%s), who could change what opx writes there; use a directory of your own",
		open:  "is writable by other users (%s), who could change what opx writes there; chmod go-w it"})
}

// dirRule is what checkUserDir refuses in a directory's permission bits, and how it says
// each refusal (other and open take the directory's owner and mode).
type dirRule struct {
	perm                 fs.FileMode
	symlink, other, open string
}

// checkUserDir checks that path is a real directory (not a symlink) owned by the
// effective user, with none of rule.perm's permission bits.
func checkUserDir(path string, rule dirRule) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UntrustedError{path, rule.symlink}
	case !fi.IsDir():
		return &UntrustedError{path, "is not a directory"}
	case UID(fi) != os.Geteuid():
		return &UntrustedError{path, fmt.Sprintf(rule.other, Owner(fi))}
	case fi.Mode().Perm()&rule.perm != 0:
		return &UntrustedError{path, fmt.Sprintf(rule.open, Owner(fi))}
	}
	return nil
}

// MkdirPrivate creates path as a directory of this user's alone (mode 0700), or accepts the
// one already there when CheckPrivateDir does. Its parent must exist.
func MkdirPrivate(path string) error {
	err := os.Mkdir(path, 0o700)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	return CheckPrivateDir(path)
}

// CheckTrustedFile checks that a file opx did not create itself could only have been
// written by this user or root: a regular file (fi from Lstat: a symlink is refused), owned
// by the effective user or root, not writable by group or others.
func CheckTrustedFile(path string, fi fs.FileInfo) error {
	uid := UID(fi)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &UntrustedError{path, "is a symlink"}
	case !fi.Mode().IsRegular():
		return &UntrustedError{path, "is not a regular file"}
	case uid != os.Geteuid() && uid != 0:
		return &UntrustedError{path, fmt.Sprintf("was written by another user (%s); not trusting it", Owner(fi))}
	case fi.Mode().Perm()&0o022 != 0:
		return &UntrustedError{path, fmt.Sprintf("is writable by other users (%s); not trusting it", Owner(fi))}
	}
	return nil
}

// CheckGranting is the one rule for a file that grants access — a token file, a history
// store — checked on its Lstat fi: the file itself (a symbolic link is refused: another
// user could point it anywhere), a regular file, owned by this user or root (its owner
// decides who gets in), writable by no one else; a secret's (a token file's) readable by no
// one else either. what names the file in the message.
func CheckGranting(path, what string, fi fs.FileInfo, secret bool) error {
	uid := UID(fi)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: opx does not follow one to %s (another user could point it anywhere); name the file itself", path, what)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: %s is not a regular file", path, what)
	case uid != os.Geteuid() && uid != 0:
		return fmt.Errorf("%s: %s belongs to another user (%s), who could change what it grants: opx uses only its user's own; copy it, or run as its owner", path, what, Owner(fi))
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s: other users may write %s (mode %04o): chmod go-w it", path, what, fi.Mode().Perm())
	case secret && fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s: other users may read %s (mode %04o): chmod 600 it", path, what, fi.Mode().Perm())
	}
	return nil
}

// OpenGranting opens a file that grants access (CheckGranting) for reading: checked on its
// own Lstat, opened without following a link, and checked again on what was opened (a
// file swapped between the two is refused).
func OpenGranting(path, what string, secret bool) (*os.File, fs.FileInfo, error) {
	li, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckGranting(path, what, li, secret); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !os.SameFile(li, fi) {
		err = fmt.Errorf("%s: %s was replaced while opx opened it", path, what)
	}
	if err == nil {
		err = CheckGranting(path, what, fi, secret)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// CheckSharedDir checks a directory that other users may share (an image cache, a storage
// root, a directory above a stage): a directory once symlinks are resolved, owned by this
// user or root (an owner can always rename what lies in it), and, when others may write
// it, sticky (so they cannot rename or replace what this user put there).
func CheckSharedDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	uid := UID(fi)
	switch {
	case !fi.IsDir():
		return &UntrustedError{path, "is not a directory"}
	case uid != os.Geteuid() && uid != 0:
		return &UntrustedError{path, fmt.Sprintf("belongs to another user (%s), who could replace what opx puts there", Owner(fi))}
	case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
		return &UntrustedError{path, fmt.Sprintf("is writable by other users without the sticky bit (%s), who could replace what opx puts there", Owner(fi))}
	}
	return nil
}

// CheckAncestors checks every directory above path (symlinks resolved) with CheckSharedDir:
// another user who may rename one of them could swap what lies below.
func CheckAncestors(path string) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return err
	}
	for {
		if err := CheckSharedDir(dir); err != nil {
			return err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil
		}
		dir = up
	}
}

// ErrTooLarge is a file over the reader's bound; ErrNotRegular a FIFO, device, socket or
// directory where a file was expected. ReadRegular returns them in an *fs.PathError.
var (
	ErrTooLarge   = errors.New("too large")
	ErrNotRegular = errors.New("not a regular file")
	// ErrDangling is a symbolic link to nothing where a file should be: not an absent file.
	ErrDangling = errors.New("a symbolic link to nothing")
)

// MaxInput bounds every input file opx reads whole (results files, manifests, status and
// execution files): far above what a 500-case shard writes (about 1 MB), far below what
// would exhaust a submit host's memory.
const MaxInput = 256 << 20

// OpenRegular opens a regular file for reading, and its size and mode: the one way opx
// opens a file that came from outside. It never blocks on a FIFO (opened non-blocking,
// then refused), and a device, a directory or a link to nothing is an error naming the
// path ("not a regular file", "a symbolic link to nothing").
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			// a link to nothing is not an absent file: someone put it there
			return nil, nil, &fs.PathError{Op: "read", Path: path, Err: ErrDangling}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	return f, fi, nil
}

// ReadRegular reads a whole regular file of at most max bytes. It never blocks on a FIFO
// or reads a device (a results tree is outside input: it may hold a FIFO, or a symlink to
// /dev/zero), and it stops between reads when ctx ends.
func ReadRegular(ctx context.Context, path string, max int64) ([]byte, error) {
	return ReadRegularInto(ctx, path, max, nil)
}

// ReadRegularInto is ReadRegular into buf's room (grown when the file needs more): for a
// reader that decodes a file and keeps nothing of its bytes, one buffer serves a run of
// files, unzeroed and already mapped.
func ReadRegularInto(ctx context.Context, path string, max int64, buf []byte) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenedInto(ctx, f, fi, max, buf)
}

// hugeRead is the size from which a read's buffer is backed by huge pages where the
// system allows (adviseHugePages): two of them, so that at least one whole 2 MiB page
// lies inside it.
const hugeRead = 4 << 20

// ReadOpenedInto is ReadRegularInto of a file OpenRegular opened (fi its size and mode),
// for a reader that keeps the file open after reading it whole. A buffer it makes for a
// large file is backed by huge pages where the system allows (adviseHugePages).
func ReadOpenedInto(ctx context.Context, f *os.File, fi fs.FileInfo, max int64, buf []byte) ([]byte, error) {
	path := f.Name()
	tooLarge := func(size string) error {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s; at most %d)", ErrTooLarge, size, max)}
	}
	if fi.Size() > max {
		return nil, tooLarge(fmt.Sprintf("%d bytes", fi.Size()))
	}
	b := buf[:0]
	if int64(cap(b)) < fi.Size()+1 {
		b = make([]byte, 0, fi.Size()+1)
		adviseHugePages(b)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		chunk := min(cap(b)-len(b), 4<<20)
		n, err := f.Read(b[len(b) : len(b)+chunk])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return nil, tooLarge("it grew while read")
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// SafeName reports whether v can be one component of a path opx builds: 1-128 letters,
// digits, '.', '_' and '-', starting with a letter or digit, and no "..".
func SafeName(v string) bool {
	if v == "" || len(v) > 128 || strings.Contains(v, "..") {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// ReadJSON reads a regular file (ReadRegular, MaxInput) and parses it with Python's JSON
// rules (pyjson): the one reader of every JSON document opx did not write in this process
// (manifests, execution, status and results files), so they all accept and refuse the same
// inputs. Errors name the file.
func ReadJSON(ctx context.Context, path string) (pyjson.Value, error) {
	return ReadJSONDepth(ctx, path, math.MaxInt)
}

// ReadJSONDepth is ReadJSON building only the top depth levels (pyjson.ParseDepth): for
// readers that need a large document's outline, not its leaves.
func ReadJSONDepth(ctx context.Context, path string, depth int) (pyjson.Value, error) {
	b, err := ReadRegular(ctx, path, MaxInput)
	if err != nil {
		return nil, err
	}
	v, err := pyjson.ParseDepth(b, depth)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// CheckJSONObject says whether b is a JSON object by the same rules as ReadJSON: for a
// document fetched rather than read from a file (a model's config.json), before opx
// writes it into a stage.
func CheckJSONObject(b []byte) error {
	v, err := pyjson.Parse(b)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := v.(*pyjson.Object); !ok {
		return errors.New("not a JSON object")
	}
	return nil
}
