package fingerprint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/safe"
)

// SelfEnv names the measuring claim of the run a fingerprint step belongs to: its own
// claim is not "another run".
const SelfEnv = "OPX_MEASURING_SELF"

// Measuring is a run's claim, while its benchmark runs, that it is measuring on this
// machine: a file in the machine's registry ($TMPDIR/opx-measuring, a sticky directory
// every user may write, as /tmp is) held under flock(2). A claim whose process died is
// released by the kernel with its lock, so a stale file is never taken for a live run.
type Measuring struct {
	f    *os.File
	path string
}

// registry is the machine's directory of claims, created sticky and world-writable when
// absent; one that is a link, not a directory, or writable by others without the sticky
// bit (anyone could remove a claim) is not used.
func registry(env []string) (string, error) {
	tmp := envOf(env, "TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	dir := filepath.Join(tmp, "opx-measuring")
	if err := os.Mkdir(dir, 0o777); err == nil {
		if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
			return "", err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a directory", dir)
	case fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0:
		return "", fmt.Errorf("%s is writable by every user without the sticky bit", dir)
	case files.UID(fi) != 0 && files.UID(fi) != os.Geteuid() && fi.Mode()&fs.ModeSticky == 0:
		return "", fmt.Errorf("%s belongs to another user", dir)
	}
	return dir, nil
}

var claims atomic.Int64 // this process's claims so far: each its own file

// StartMeasuring claims the machine's registry for this process until Close; what says
// which run it is (one line, shown to other runs).
func StartMeasuring(env []string, what string) (*Measuring, error) {
	dir, err := registry(env)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	path := filepath.Join(dir, host+"-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(claims.Add(1), 10))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	fmt.Fprintf(f, "pid %d: %s\n", os.Getpid(), strings.ReplaceAll(what, "\n", " "))
	return &Measuring{f: f, path: path}, nil
}

// Name is the claim's name in the registry (what SelfEnv carries).
func (m *Measuring) Name() string { return filepath.Base(m.path) }

// Close releases the claim.
func (m *Measuring) Close() error {
	os.Remove(m.path)
	return m.f.Close() // the lock goes with the descriptor
}

// OthersMeasuring is each run that holds a claim on this machine now but self: its line
// (escaped). A registry that cannot be used, or a claim that cannot be read, is no run.
func OthersMeasuring(env []string, self string) []string {
	dir, err := registry(env)
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Name() == self || !e.Type().IsRegular() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil { // nobody holds it: a claim whose run is gone
			f.Close()
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 512))
		f.Close()
		line, _, _ := strings.Cut(string(b), "\n")
		if line == "" {
			line = e.Name()
		}
		out = append(out, safe.Text(line))
	}
	return out
}

// BusyLoadEnv sets the 1-minute load above which a machine is busy, for a machine whose
// quiet load is not zero (a resident daemon); unset, it is the machine's cores.
const BusyLoadEnv = "OPX_BUSY_LOAD"

// BusyLoad is the load above which a machine of cores CPUs is busy: $OPX_BUSY_LOAD when it
// is a number, else cores (0: unknown, never busy).
func BusyLoad(env []string, cores int) float64 {
	if v, err := strconv.ParseFloat(envOf(env, BusyLoadEnv), 64); err == nil && v > 0 {
		return v
	}
	return float64(cores)
}

// Busy is why the machine is busy now, "" when it is not: the 1-minute load above
// BusyLoad, less own (the processes of the caller's own measurement, already running).
func (f *Fingerprint) Busy(own int) string {
	if f == nil || len(f.Load) == 0 {
		return ""
	}
	limit := f.BusyLoad
	if limit == 0 {
		limit = float64(f.Cores) // a snapshot of before the limit was recorded
	}
	if limit <= 0 || f.Load[0]-float64(own) <= limit {
		return ""
	}
	if own > 0 {
		return fmt.Sprintf("the machine's load was %.1f on %d cores (%d of it this shard's ranks)", f.Load[0], f.Cores, own)
	}
	return fmt.Sprintf("the machine's load was %.1f on %d cores", f.Load[0], f.Cores)
}

// Contention is what a shard's fingerprints say contended with its measurement — other
// opx runs measuring on its machine, a load above what the machine's cores carry (before
// it started, or after it ended less its own ws ranks) — "" when nothing did: the one
// definition every command's "measured under contention" reads.
func Contention(before, after *Fingerprint, ws int) string {
	seen := map[string]bool{}
	var runs []string
	for _, f := range []*Fingerprint{before, after} {
		if f == nil {
			continue
		}
		for _, o := range f.OtherRuns {
			if !seen[o] {
				seen[o] = true
				runs = append(runs, o)
			}
		}
	}
	var why []string
	if len(runs) > 0 {
		why = append(why, "another opx run measured on this machine at the same time ("+strings.Join(runs, "; ")+")")
	}
	if b := before.Busy(0); b != "" {
		why = append(why, b+" as it started")
	} else if a := after.Busy(ws); a != "" {
		why = append(why, a+" as it ended")
	}
	return strings.Join(why, "; ")
}

// BusyNow is why this machine is busy now ("" when it is not): other opx runs measuring
// on it (but self), or a 1-minute load above BusyLoad — what opx doctor --runner local
// warns of.
func BusyNow(env []string, self string) string {
	why := LoadNow(env)
	if o := OthersMeasuring(env, self); len(o) > 0 {
		return strings.TrimPrefix(strings.Join([]string{"another opx run is measuring on it (" + strings.Join(o, "; ") + ")", why}, "; "), "; ")
	}
	return why
}

// LoadNow is the machine's load now when it is above BusyLoad ("the machine's load is 3.1
// on 2 cores"), "" when it is not or cannot be read: what opx run warns of before a local
// shard measures.
func LoadNow(env []string) string {
	f := &Fingerprint{Load: loadAverage("")}
	_, f.Cores, _, _ = cpuInfo("/proc/cpuinfo")
	f.BusyLoad = BusyLoad(env, f.Cores)
	return strings.Replace(f.Busy(0), "load was", "load is", 1)
}
