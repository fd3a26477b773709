package image

// enroot cannot run here, so it is a recording fake (fakeEnroot): a shell script that logs
// its argv and the enroot environment it was given, checks that the scratch directories
// exist, and builds a real squashfs with mksquashfs. Everything else is real:
// go-containerregistry's in-memory registry behind httptest, squashfs-tools, flock.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"

	"github.com/gofrs/flock"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/semianalysis/opx/internal/plan"
	"github.com/semianalysis/opx/internal/registry"
	"github.com/semianalysis/opx/internal/testenv"
)

func TestMain(m *testing.M) {
	// helper mode: hold a lock until killed (the "holder was SIGKILLed" test)
	if p := os.Getenv("OPX_TEST_HOLD_LOCK"); p != "" {
		l := flock.New(p)
		if err := l.Lock(); err != nil {
			fmt.Println("lock failed:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

type fixture struct {
	t                 *testing.T
	dir, cache, log   string
	enroot            string
	reg               *httptest.Server
	image, digest     string
	resolver          *registry.Resolver
	machine, platform string
}

func needTools(t *testing.T) {
	for _, tool := range []string{"mksquashfs", "unsquashfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("OPX_REQUIRE_SLURM") != "" {
				t.Fatalf("%s is missing (scripts/test.sh installs squashfs-tools)", tool)
			}
			t.Skipf("%s is missing (install squashfs-tools)", tool)
		}
	}
}

func newFixture(t *testing.T) *fixture {
	needTools(t)
	f := &fixture{t: t, dir: t.TempDir(), machine: "x86_64", platform: "linux/amd64"}
	f.cache = filepath.Join(f.dir, "base", "containers")
	f.log = filepath.Join(f.dir, "enroot.log")
	f.enroot = filepath.Join(f.dir, "enroot")
	script := `#!/bin/sh
# recording fake of enroot: log, check the scratch dirs, build a real squashfs
{ printf 'argv:'; for a in "$@"; do printf ' %s' "$a"; done; printf '\n'
  printf 'env: TMPDIR=%s ENROOT_TEMP_PATH=%s ENROOT_DATA_PATH=%s ENROOT_RUNTIME_PATH=%s ENROOT_CACHE_PATH=%s\n' \
    "$TMPDIR" "$ENROOT_TEMP_PATH" "$ENROOT_DATA_PATH" "$ENROOT_RUNTIME_PATH" "$ENROOT_CACHE_PATH"; } >> "$FAKE_ENROOT_LOG"
for d in "$TMPDIR" "$ENROOT_TEMP_PATH" "$ENROOT_DATA_PATH" "$ENROOT_RUNTIME_PATH" "$ENROOT_CACHE_PATH"; do
  [ -d "$d" ] || { echo "fake enroot: $d is not a directory" >&2; exit 3; }
done
[ "$1" = import ] && [ "$2" = -o ] || { echo "fake enroot: unexpected argv $*" >&2; exit 2; }
[ -n "$FAKE_ENROOT_FAIL" ] && { echo "fake enroot: failing as asked" >&2; exit 1; }
sleep "${FAKE_ENROOT_SLEEP:-0}"
root="$TMPDIR/rootfs"; mkdir -p "$root/etc" "$root/usr/bin"
echo "$4" > "$root/etc/image-uri"; head -c 200000 /dev/urandom > "$root/usr/bin/blob"
mksquashfs "$root" "$3" -noappend -quiet -no-progress >/dev/null
`
	if err := os.WriteFile(f.enroot, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	f.reg = httptest.NewServer(reg)
	t.Cleanup(f.reg.Close)
	f.image = strings.TrimPrefix(f.reg.URL, "http://") + "/opx/bench:1"
	f.digest = f.push(f.image)
	f.resolver = &registry.Resolver{Timeout: 5 * time.Second}
	return f
}

// push puts a fresh random image under ref and returns its digest.
func (f *fixture) push(ref string) string {
	f.t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		f.t.Fatal(err)
	}
	d, _ := img.Digest()
	return d.String()
}

func (f *fixture) opts(env ...string) Options {
	return Options{Cache: f.cache, Image: f.image, Digest: f.digest, ImagePlatform: f.platform, Machine: f.machine,
		Environ: append(append(os.Environ(), "FAKE_ENROOT_LOG="+f.log), env...), Resolver: f.resolver,
		Enroot: f.enroot, LockPoll: 10 * time.Millisecond}
}

// calls returns the argv lines the fake enroot logged.
func (f *fixture) calls() []string {
	b, _ := os.ReadFile(f.log)
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "argv: "); ok {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) entries() []string {
	ents, _ := os.ReadDir(f.cache)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestImportThenReuse(t *testing.T) {
	f := newFixture(t)
	res, err := Run(context.Background(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	if !res.Imported || res.Squash != filepath.Join(f.cache, key+".sqsh") {
		t.Fatalf("result %+v", res)
	}
	uri, _ := TagURI(f.image)
	// enroot writes into a private directory of this import's own, in the cache
	want := regexp.MustCompile("^import -o " + regexp.QuoteMeta(filepath.Join(f.cache, "."+key+".partial-")) + "[0-9]+/" +
		regexp.QuoteMeta(key+".sqsh "+uri) + "$")
	if c := f.calls(); len(c) != 1 || !want.MatchString(c[0]) {
		t.Fatalf("enroot calls %q, want [%s]", c, want)
	}
	if err := Validate(context.Background(), res.Squash, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.entries(); strings.Join(got, " ") != key+".lock "+key+".sqsh" {
		t.Fatalf("cache holds %v", got)
	}
	// the scratch directory enroot ran in is gone
	b, _ := os.ReadFile(f.log)
	env := strings.Fields(strings.SplitN(string(b), "env: ", 2)[1])
	tmp := strings.TrimPrefix(env[0], "TMPDIR=")
	if !strings.Contains(tmp, "operatorx-enroot-") {
		t.Fatalf("TMPDIR %s is not a private scratch dir", tmp)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("scratch %s was not removed", tmp)
	}
	for _, kv := range env[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(v, tmp+"/") {
			t.Errorf("%s=%s is not under the scratch dir", k, v)
		}
	}
	// the second import reuses the entry: enroot is not run again
	res, err = Run(context.Background(), f.opts())
	if err != nil || res.Imported {
		t.Fatalf("second import: %+v %v", res, err)
	}
	if c := f.calls(); len(c) != 1 {
		t.Fatalf("enroot ran %d times", len(c))
	}
}

func TestImportKeepsConfiguredEnrootCache(t *testing.T) {
	f := newFixture(t)
	shared := filepath.Join(f.dir, "enroot-cache")
	os.Mkdir(shared, 0o755)
	if _, err := Run(context.Background(), f.opts("ENROOT_CACHE_PATH="+shared)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f.log)
	if !strings.Contains(string(b), "ENROOT_CACHE_PATH="+shared+"\n") {
		t.Fatalf("ENROOT_CACHE_PATH was replaced: %s", b)
	}
}

func TestImportRefusesMovedTag(t *testing.T) {
	f := newFixture(t)
	f.push(f.image) // the tag now points elsewhere
	_, err := Run(context.Background(), f.opts())
	if err == nil || err.Error() != "image tag moved or digest verification failed; dispatch again" {
		t.Fatalf("err = %v", err)
	}
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	if got := f.entries(); strings.Join(got, " ") != key+".lock" {
		t.Fatalf("a moved tag left %v in the cache", got)
	}
}

func TestImportPinnedImageIsNotRechecked(t *testing.T) {
	f := newFixture(t)
	f.image = strings.TrimSuffix(f.image, ":1") + "@" + f.digest
	f.reg.Close() // nobody to ask: a re-check would fail
	res, err := Run(context.Background(), f.opts())
	if err != nil || !res.Imported {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestImportByDigestURIIsNotRechecked(t *testing.T) {
	// the containers.toml digest fallback: the tag is gone, the URI names the digest
	f := newFixture(t)
	o := f.opts()
	o.URI = plan.EnrootURI(strings.TrimSuffix(f.image, ":1") + "@" + f.digest)
	f.reg.Close()
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if c := f.calls(); len(c) != 1 || !strings.HasSuffix(c[0], ":"+f.digest) {
		t.Fatalf("enroot calls %q", c)
	}
}

func TestTwoArchitecturesTwoEntries(t *testing.T) {
	f := newFixture(t)
	if _, err := Run(context.Background(), f.opts()); err != nil {
		t.Fatal(err)
	}
	o := f.opts()
	o.ImagePlatform, o.Machine = "linux/arm64", "aarch64"
	res, err := Run(context.Background(), o)
	if err != nil || !res.Imported {
		t.Fatalf("%+v %v", res, err)
	}
	a := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	b := manifest.ImageKey(f.image, f.digest, "linux/arm64")
	if got := strings.Join(f.entries(), " "); got != strings.Join(sorted(a+".lock", a+".sqsh", b+".lock", b+".sqsh"), " ") {
		t.Fatalf("cache holds %s", got)
	}
	if len(f.calls()) != 2 {
		t.Fatalf("enroot ran %d times", len(f.calls()))
	}
}

func sorted(s ...string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestArchitectureCheckedBeforeAnythingIsCreated(t *testing.T) {
	f := newFixture(t)
	o := f.opts()
	o.ImagePlatform = "linux/arm64" // on an x86_64 host
	_, err := Run(context.Background(), o)
	if err == nil || err.Error() != "image platform does not match the import host" {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(f.cache); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the cache directory was created")
	}
	if len(f.calls()) != 0 {
		t.Fatal("enroot ran")
	}
}

func TestConcurrentImportsRunEnrootOnce(t *testing.T) {
	f := newFixture(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	imported := make([]bool, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Run(context.Background(), f.opts("FAKE_ENROOT_SLEEP=0.3"))
			errs[i], imported[i] = err, res.Imported
		}()
	}
	wg.Wait()
	count := 0
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Errorf("import %d: %v", i, errs[i])
		}
		if imported[i] {
			count++
		}
	}
	if c := f.calls(); len(c) != 1 || count != 1 {
		t.Fatalf("enroot ran %d times, %d imports claim the work; want 1 and 1", len(c), count)
	}
}

func TestTruncatedEntryIsReplaced(t *testing.T) {
	f := newFixture(t)
	res, err := Run(context.Background(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(res.Squash)
	if err := os.Truncate(res.Squash, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	// the seed's check alone accepts it (decisions §7): this is why Validate reads more
	if err := exec.Command("unsquashfs", "-s", res.Squash).Run(); err != nil {
		t.Logf("note: this unsquashfs rejects a truncated file itself (%v)", err)
	}
	if err := Validate(context.Background(), res.Squash, "", nil); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Validate of a truncated squash: %v", err)
	}
	res, err = Run(context.Background(), f.opts())
	if err != nil || !res.Imported || !strings.Contains(res.Replaced, "truncated") {
		t.Fatalf("%+v %v", res, err)
	}
	if err := Validate(context.Background(), res.Squash, "", nil); err != nil {
		t.Fatal(err)
	}
	if len(f.calls()) != 2 {
		t.Fatalf("enroot ran %d times", len(f.calls()))
	}
}

func TestGarbageEntryAndStalePartialAreReplaced(t *testing.T) {
	f := newFixture(t)
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	os.MkdirAll(f.cache, 0o700)
	os.WriteFile(filepath.Join(f.cache, key+".sqsh"), []byte("<html>proxy error</html>"), 0o644)
	os.WriteFile(filepath.Join(f.cache, key+".partial"), []byte("half an import"), 0o644)
	res, err := Run(context.Background(), f.opts())
	if err != nil || !res.Imported {
		t.Fatalf("%+v %v", res, err)
	}
	if err := Validate(context.Background(), res.Squash, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.cache, key+".partial")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the stale .partial is still there")
	}
}

func TestFailedEnrootLeavesNothing(t *testing.T) {
	f := newFixture(t)
	_, err := Run(context.Background(), f.opts("FAKE_ENROOT_FAIL=1"))
	if err == nil || !strings.Contains(err.Error(), "enroot import of docker://") {
		t.Fatalf("err = %v", err)
	}
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	if got := strings.Join(f.entries(), " "); got != key+".lock" {
		t.Fatalf("cache holds %s", got)
	}
}

// holdLock starts a process that holds the image's lock and returns it once it does.
func (f *fixture) holdLock() *exec.Cmd {
	f.t.Helper()
	os.MkdirAll(f.cache, 0o700)
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OPX_TEST_HOLD_LOCK="+filepath.Join(f.cache, key+".lock"))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		f.t.Fatalf("lock holder said %q", line)
	}
	f.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func TestLockOfKilledHolderIsFree(t *testing.T) {
	f := newFixture(t)
	holder := f.holdLock()
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, f.opts())
	if err != nil || !res.Imported {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestWaitingForTheLockHonoursCancellation(t *testing.T) {
	f := newFixture(t)
	f.holdLock()
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, errors.New("workflow cancelled"))
	defer cancel()
	_, err := Run(ctx, f.opts())
	if err == nil || !strings.Contains(err.Error(), "waiting for the image lock") || !strings.Contains(err.Error(), "workflow cancelled") {
		t.Fatalf("err = %v", err)
	}
	if len(f.calls()) != 0 {
		t.Fatal("enroot ran without the lock")
	}
}

// Finding 7: an interrupted validity check of a good cache entry (SIGTERM during
// `unsquashfs -s`, or unsquashfs absent) deleted the entry as "damaged". A check that
// cannot finish now keeps the entry and fails the import, saying so.
func TestUnfinishedCheckKeepsEntry(t *testing.T) {
	f := newFixture(t)
	res, err := Run(context.Background(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(res.Squash)
	keep := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "could not check cache entry "+res.Squash) || !strings.Contains(err.Error(), "keeping it") {
			t.Errorf("%s: err = %v", what, err)
		}
		if b, _ := os.ReadFile(res.Squash); string(b) != string(good) {
			t.Errorf("%s: the good entry was removed or changed", what)
		}
		if n := len(f.calls()); n != 1 {
			t.Errorf("%s: enroot ran %d times", what, n)
		}
	}
	o := f.opts()
	o.Unsquashfs = filepath.Join(f.dir, "no-such-unsquashfs")
	_, err = Run(context.Background(), o)
	keep("unsquashfs missing", err)

	// a slow check (the real unsquashfs behind a pause), cut short by cancellation and by a
	// signal from outside
	slow := filepath.Join(f.dir, "slow-unsquashfs")
	os.WriteFile(slow, []byte("#!/bin/sh\necho $$ > \"$SLOW_PID\"\nsleep 30\nexec unsquashfs \"$@\"\n"), 0o755)
	o = f.opts("SLOW_PID=" + filepath.Join(f.dir, "slow.pid"))
	o.Unsquashfs = slow
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		waitForFile(t, filepath.Join(f.dir, "slow.pid"))
		cancel(errors.New("SIGTERM"))
	}()
	_, err = Run(ctx, o)
	keep("check cancelled", err)
	os.Remove(filepath.Join(f.dir, "slow.pid"))
	go func() {
		waitForFile(t, filepath.Join(f.dir, "slow.pid"))
		b, _ := os.ReadFile(filepath.Join(f.dir, "slow.pid"))
		var pid int
		fmt.Sscan(string(b), &pid)
		syscall.Kill(pid, syscall.SIGTERM)
	}()
	_, err = Run(context.Background(), o)
	keep("unsquashfs killed", err)
}

func waitForFile(t *testing.T, path string) {
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s never appeared", path)
}

// Finding 2: in a shared (1777) image cache, a <key>.sqsh planted by another user was
// "reused" without question, and a <key>.lock planted as a symlink was followed (root
// created its target). Both are refused now, naming the file; nothing of the planted
// files is run, followed or deleted.
func TestSharedCacheTrustsNoOtherUser(t *testing.T) {
	f := newFixture(t)
	_, otherUID := testenv.OtherUser(t)
	key := manifest.ImageKey(f.image, f.digest, "linux/amd64")
	shared := testenv.SharedDir(t)
	f.cache = filepath.Join(shared, "cache")
	os.Mkdir(f.cache, 0o755)
	os.Chmod(f.cache, os.ModeSticky|0o777)
	os.Mkdir(filepath.Join(shared, "other"), 0o755)
	os.Chown(filepath.Join(shared, "other"), otherUID, -1)

	// the other user builds a real, valid squashfs of their own and plants it
	testenv.AsOther(t, "mkdir -p "+shared+"/other/root/etc && echo evil > "+shared+"/other/root/etc/passwd && mksquashfs "+
		shared+"/other/root "+f.cache+"/"+key+".sqsh -quiet -no-progress >/dev/null")
	_, err := Run(context.Background(), f.opts())
	if err == nil || !strings.Contains(err.Error(), key+".sqsh: was written by another user (owner uid "+fmt.Sprint(otherUID)) {
		t.Fatalf("planted entry: err = %v", err)
	}
	if len(f.calls()) != 0 {
		t.Error("enroot ran although the entry was refused")
	}
	if _, err := os.Stat(filepath.Join(f.cache, key+".sqsh")); err != nil {
		t.Errorf("the other user's file was removed: %v", err)
	}
	os.Remove(filepath.Join(f.cache, key+".sqsh"))
	os.Remove(filepath.Join(f.cache, key+".lock"))

	// a lock planted as a symlink to a file that does not exist yet
	target := filepath.Join(shared, "other", "created-by-root")
	testenv.AsOther(t, "ln -s "+target+" "+f.cache+"/"+key+".lock")
	_, err = Run(context.Background(), f.opts())
	if err == nil || !strings.Contains(err.Error(), key+".lock is a symlink; not following it") {
		t.Fatalf("planted lock: err = %v", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("the symlinked lock was followed: %s exists", target)
	}

	// a cache others may write without the sticky bit is refused whole
	loose := filepath.Join(shared, "loose")
	os.Mkdir(loose, 0o755)
	os.Chmod(loose, 0o777)
	f.cache = loose
	_, err = Run(context.Background(), f.opts())
	if err == nil || !strings.Contains(err.Error(), "is writable by other users without the sticky bit") {
		t.Fatalf("loose cache: err = %v", err)
	}

	// this user's own entry in the shared cache is reused as before
	f.cache = filepath.Join(shared, "cache")
	os.Remove(filepath.Join(f.cache, key+".lock"))
	if res, err := Run(context.Background(), f.opts()); err != nil || !res.Imported {
		t.Fatalf("import into the shared cache: %+v %v", res, err)
	}
	if res, err := Run(context.Background(), f.opts()); err != nil || res.Imported {
		t.Fatalf("reuse in the shared cache: %+v %v", res, err)
	}
}

// Registry names as Docker parses them (issue 17): a first component with "." or ":", or
// localhost, is the registry host; the seed sent localhost:5000/busybox:1 to Docker Hub.
func TestTagURI(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		"localhost:5000/busybox:1":         "docker://localhost:5000#busybox:1",
		"localhost/busybox":                "docker://localhost#busybox:latest",
		"myhost:5000/a/b":                  "docker://myhost:5000#a/b:latest",
		"nvcr.io/nvidia/pytorch:26.03-py3": "docker://nvcr.io#nvidia/pytorch:26.03-py3",
		"ubuntu":                           "docker://registry-1.docker.io#library/ubuntu:latest",
		"vllm/vllm-openai:v0.11.0":         "docker://registry-1.docker.io#vllm/vllm-openai:v0.11.0",
		"docker.io/library/ubuntu:22.04":   "docker://registry-1.docker.io#library/ubuntu:22.04",
		"ubuntu@sha256:" + h:               "docker://registry-1.docker.io#library/ubuntu:sha256:" + h,
	} {
		if got, err := TagURI(in); err != nil || got != want {
			t.Errorf("TagURI(%s) = %s %v, want %s", in, got, err, want)
		}
	}
	if _, err := TagURI("Bad Name:1"); err == nil {
		t.Error("an invalid reference was accepted")
	}
}
