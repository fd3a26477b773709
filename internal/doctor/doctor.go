// Package doctor is `opx doctor`: everything a runner's shard needs, checked on the submit host
// before a node is allocated, each finding with what to do.
//
// It is `opx doctor --runner LABEL`: on a submit host, check everything a
// shard of that runner will need before a GPU node is allocated — the Slurm commands and
// the controller, the partition, pyxis and enroot (and which import path enroot's version
// allows), unsquashfs, the shared storage root (writable, free space), the enroot cache,
// the platform entry, and the opx binary for the runner's architecture. Each finding says
// what to do about it.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/semianalysis/opx/internal/fingerprint"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/platform"
	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/shard"
)

// Status of a finding.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Finding is one check's result.
type Finding struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// WriteJSON writes the findings for scripts: {"runner", "ready", "findings": [...]};
// ready is false when a required check failed.
func WriteJSON(w io.Writer, runner string, fs []Finding) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Runner   string    `json:"runner"`
		Ready    bool      `json:"ready"`
		Findings []Finding `json:"findings"`
	}{runner, !Failed(fs), fs})
}

// Options are the host facts doctor reads; tests point them at fakes and temp dirs.
type Options struct {
	Entry    *platform.Facts // the runner's entry (platform.Registry.Facts)
	Getenv   func(string) string
	Environ  []string      // the environment commands run with (PATH decides what is found)
	Timeout  time.Duration // per command (default 15 s)
	MinFree  uint64        // bytes of free space the storage root needs (default 20 GiB)
	Binary   func(imagePlatform string) (string, error)
	LookPath func(string) (string, error) // default: exec.LookPath on Environ's PATH
}

// Run checks the host and returns the findings in a stable order.
func Run(ctx context.Context, o Options) []Finding {
	if o.Timeout == 0 {
		o.Timeout = 15 * time.Second
	}
	if o.MinFree == 0 {
		o.MinFree = 20 << 30
	}
	if o.LookPath == nil {
		o.LookPath = lookPathIn(o.Environ)
	}
	d := &doc{o: o, ctx: ctx}
	d.entry()
	local := o.Entry.Runner.Label == platform.Local
	mode := o.Entry.Container
	if local {
		d.add(Finding{Check: "slurm", Status: Skip, Detail: "the local runner runs ranks as processes on this machine"})
		// what plan allows on it: the same words (platform.LocalBackends)
		if can, missing := platform.LocalBackends(ctx, o.Environ); missing != "" {
			d.add(Finding{Check: "backends", Status: Warn, Detail: "cpu only: " + missing,
				Fix: "install the OperatorX harness for python3 to run vllm or torch here; --backends cpu needs nothing"})
		} else {
			d.add(Finding{Check: "backends", Status: OK, Detail: can})
		}
		// a busy machine measures the load, not the code
		if busy := fingerprint.BusyNow(o.Environ, ""); busy != "" {
			d.add(Finding{Check: "quiet machine", Status: Warn, Detail: busy + ": rows measured so are marked contended, and compare and the history gate ask for them again",
				Fix: "measure when the machine is quiet (stop the other work, or wait for the other opx run); " + fingerprint.BusyLoadEnv + " sets the load above which it is busy"})
		} else {
			d.add(Finding{Check: "quiet machine", Status: OK, Detail: "no other opx run measuring here, and a load within its cores"})
		}
	} else {
		d.slurm()
	}
	if mode == "pyxis" {
		d.pyxis(local || d.controllerUp)
		d.enroot()
		d.tool("unsquashfs", "unsquashfs", "checks every imported squash (squashfs-tools)", "install squashfs-tools on the submit host and the compute nodes")
	} else {
		d.add(Finding{Check: "containers", Status: Skip, Detail: "container mode none: no pyxis, enroot or unsquashfs needed"})
	}
	d.storage()
	d.binary()
	return d.out
}

type doc struct {
	o   Options
	ctx context.Context
	out []Finding
	// controllerUp is whether the Slurm controller answered: srun, which pyxis's check
	// asks, cannot be judged without it
	controllerUp bool
}

func (d *doc) add(f Finding) { d.out = append(d.out, f) }

func lookPathIn(environ []string) func(string) (string, error) {
	path := os.Getenv("PATH")
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return func(name string) (string, error) {
		for _, dir := range filepath.SplitList(path) {
			if dir == "" {
				dir = "."
			}
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found on PATH", name)
	}
}

// output runs a command with the options' environment and timeout.
func (d *doc) output(argv ...string) (string, error) {
	p, err := d.o.LookPath(argv[0])
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(d.ctx, d.o.Timeout)
	defer cancel()
	var out strings.Builder
	err = proc.Run(ctx, proc.Cmd{Argv: append([]string{p}, argv[1:]...), Env: d.o.Environ, Stdout: &out, Stderr: &out, Grace: time.Second})
	b := []byte(out.String())
	if ctx.Err() != nil {
		return string(b), fmt.Errorf("%s did not answer within %s", strings.Join(argv, " "), d.o.Timeout)
	}
	var ee *proc.ExitError
	if errors.As(err, &ee) {
		return string(b), fmt.Errorf("%s: exit status %d: %s", strings.Join(argv, " "), ee.Code, firstLine(string(b)))
	}
	if err != nil {
		return string(b), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, firstLine(string(b)))
	}
	return string(b), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (d *doc) tool(check, name, why, fix string) bool {
	p, err := d.o.LookPath(name)
	if err != nil {
		d.add(Finding{Check: check, Status: Fail, Detail: name + " not found on PATH; it " + why, Fix: fix})
		return false
	}
	d.add(Finding{Check: check, Status: OK, Detail: p})
	return true
}

// entry checks the platform entry has what execute reads.
func (d *doc) entry() {
	e := d.o.Entry
	if len(e.Missing) > 0 {
		d.add(Finding{Check: "platform entry", Status: Fail, Detail: e.Runner.Label + " lacks " + strings.Join(e.Missing, ", "),
			Fix: "complete the entry in the platform config (--platform-config)"})
		return
	}
	gpus := fmt.Sprintf("%d GPUs", e.GPUsPerNode)
	if e.GPUsPerNode == 1 {
		gpus = "1 GPU"
	}
	detail := fmt.Sprintf("%s: cluster %s, %s per node, %s, container %s", e.Runner.Label, e.Runner.Cluster, gpus, e.ImagePlatform, e.Container)
	if e.Runner.Label == platform.Local {
		detail = fmt.Sprintf("local: this machine's CPU (%d cores), %s, ranks as processes here (no container)", runtime.NumCPU(), e.ImagePlatform)
	}
	if e.Partition != "" {
		detail += ", partition " + e.Partition
	}
	d.add(Finding{Check: "platform entry", Status: OK, Detail: detail})
}

func (d *doc) slurm() {
	all := true
	for _, c := range []string{"salloc", "srun", "scancel", "squeue", "sinfo"} {
		if _, err := d.o.LookPath(c); err != nil {
			all = false
			d.add(Finding{Check: "slurm: " + c, Status: Fail, Detail: c + " not found on PATH",
				Fix: "run on the cluster's submit host, or add the Slurm client commands to PATH (Debian: slurm-client)"})
		}
	}
	if !all {
		return
	}
	d.add(Finding{Check: "slurm commands", Status: OK, Detail: "salloc, srun, scancel, squeue, sinfo on PATH"})
	out, err := d.output("squeue", "-h", "-u", strconv.Itoa(os.Getuid()), "-o", "%A")
	if err != nil {
		d.add(Finding{Check: "slurm controller", Status: Fail, Detail: err.Error(),
			Fix: "check SLURM_CONF and that slurmctld is up and reachable from this host (scontrol ping)"})
		return
	}
	n := len(strings.Fields(out))
	d.controllerUp = true
	d.add(Finding{Check: "slurm controller", Status: OK, Detail: fmt.Sprintf("squeue answers; %d job(s) of this user", n)})
	part := d.o.Entry.Partition
	if part == "" {
		return
	}
	out, err = d.output("sinfo", "-h", "-p", part, "-o", "%P %a %D %t")
	if err != nil || strings.TrimSpace(out) == "" {
		detail := "partition " + part + " not found"
		if err != nil {
			detail = err.Error()
		}
		d.add(Finding{Check: "slurm partition", Status: Fail, Detail: detail,
			Fix: "set operator.partition in the platform config to a partition sinfo lists"})
		return
	}
	d.add(Finding{Check: "slurm partition", Status: OK, Detail: strings.Join(strings.Fields(firstLine(out)), " ")})
}

// pyxis checks srun offers pyxis's --container-image. With the controller down (or the
// Slurm commands missing) srun's answer says nothing of pyxis — a configless srun cannot
// even load its plugins — so the check is left for after the controller is fixed, rather
// than blaming pyxis.
func (d *doc) pyxis(controllerUp bool) {
	if !controllerUp {
		d.add(Finding{Check: "pyxis", Status: Skip, Detail: "not checked: the Slurm controller does not answer, and srun's answer would say nothing of pyxis",
			Fix: "fix the controller (above), then run opx doctor again"})
		return
	}
	out, err := d.output("srun", "--help")
	switch {
	case err != nil && !strings.Contains(out, "Usage"):
		d.add(Finding{Check: "pyxis", Status: Fail, Detail: err.Error(), Fix: "srun must run on this host"})
	case !strings.Contains(out, "--container-image"):
		d.add(Finding{Check: "pyxis", Status: Fail, Detail: "srun --help lists no --container-image: the pyxis SPANK plugin is not loaded",
			Fix: "install pyxis (plugstack.conf) on this cluster, or set operator.container to \"none\" for bare-metal runs"})
	default:
		d.add(Finding{Check: "pyxis", Status: OK, Detail: "srun accepts --container-image"})
	}
}

// compiled on first use: every opx process pays for a package-level regexp at start-up
var enrootVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`) })

func (d *doc) enroot() {
	path, err := d.o.LookPath("enroot")
	if err != nil {
		d.add(Finding{Check: "enroot", Status: Fail, Detail: "enroot not found on PATH; opx import runs it on the node",
			Fix: "install enroot (3.5 or newer) on the compute nodes and the submit host"})
		return
	}
	out, err := d.output("enroot", "version")
	m := enrootVersion().FindStringSubmatch(out)
	if err != nil || m == nil {
		d.add(Finding{Check: "enroot", Status: Fail, Detail: "enroot version gave no version: " + firstLine(out), Fix: "reinstall enroot"})
		return
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	v := m[0]
	// opx imports by tag (docker://host#repo:tag) or by digest in the "#repo:sha256:…"
	// form (plan's import URI, the containers.toml fallback), which enroot 3.5 and 4.x both
	// take (seen with the real tools); only "@sha256:" URIs need 4.x, and opx emits none
	if major > 3 || major == 3 && minor >= 5 {
		d.add(Finding{Check: "enroot", Status: OK, Detail: "enroot " + v + ": imports by tag and by digest (docker://host#repo:sha256:…)"})
	} else {
		d.add(Finding{Check: "enroot", Status: Warn, Detail: "enroot " + v + ": older than 3.5, the oldest release opx is tested with",
			Fix: "upgrade enroot to 3.5 or newer"})
	}
	conf := readEnrootConf(d.ctx, path, d.o.Getenv)
	if os.Geteuid() != 0 {
		d.helperCaps(filepath.Dir(path))
	}
	cache, how := d.o.Getenv("ENROOT_CACHE_PATH"), "ENROOT_CACHE_PATH"
	if cache == "" {
		if c, ok := conf["ENROOT_CACHE_PATH"]; ok {
			cache, how = c.value, "ENROOT_CACHE_PATH in "+c.file
		}
	}
	if cache == "" {
		how = "enroot's default"
		base := d.o.Getenv("XDG_CACHE_HOME")
		if base == "" {
			base = filepath.Join(d.o.Getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "enroot")
	}
	d.space("enroot cache", cache, how, false)
}

type confValue struct{ value, file string }

var (
	enrootSysconf = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`config::init "([^"]+)"`) })
	enrootKey     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ENROOT_[A-Z_]+$`) })
)

// readEnrootConf reads enroot's own settings as enroot does: the enroot.conf its script
// names (config::init "<sysconfdir>/enroot.conf"), then enroot.conf.d/*.conf in order, a
// later file winning; "KEY VALUE" lines (or KEY=VALUE) with $VAR and ${VAR} expanded from
// the environment (enroot eval-echoes them; UID is the user's). A variable set in the
// environment wins over all of them, as in enroot.
func readEnrootConf(ctx context.Context, enroot string, getenv func(string) string) map[string]confValue {
	out := map[string]confValue{}
	script, err := files.ReadRegular(ctx, enroot, 1<<20)
	if err != nil {
		return out
	}
	m := enrootSysconf().FindSubmatch(script)
	if m == nil {
		return out
	}
	main := string(m[1])
	paths := []string{main}
	dropins, _ := filepath.Glob(main + ".d/*.conf")
	sort.Strings(dropins)
	paths = append(paths, dropins...)
	expand := func(k string) string {
		if k == "UID" || k == "EUID" {
			return strconv.Itoa(os.Geteuid())
		}
		return getenv(k)
	}
	for _, p := range paths {
		b, err := files.ReadRegular(ctx, p, 1<<20)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			key, value, _ := strings.Cut(strings.TrimSpace(line), " ")
			if k, v, ok := strings.Cut(key, "="); ok {
				key, value = k, v
			}
			if !enrootKey().MatchString(key) {
				continue
			}
			out[key] = confValue{value: os.Expand(strings.Trim(strings.TrimSpace(value), `"'`), expand), file: p}
		}
	}
	return out
}

// helperCaps checks the file capabilities a non-root import needs (enroot's make setcap):
// without them enroot fails with "enroot-aufs2ovlfs: failed to set capabilities".
func (d *doc) helperCaps(bin string) {
	var missing []string
	for _, h := range []string{"enroot-aufs2ovlfs", "enroot-mksquashovlfs"} {
		buf := make([]byte, 64)
		if n, err := syscall.Getxattr(filepath.Join(bin, h), "security.capability", buf); err != nil || n == 0 {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		d.add(Finding{Check: "enroot helpers", Status: Fail,
			Detail: strings.Join(missing, ", ") + " in " + bin + " have no file capabilities: an import as this user fails",
			Fix:    "as root: setcap cap_sys_admin,cap_mknod+pe " + filepath.Join(bin, "enroot-aufs2ovlfs") + " and setcap cap_sys_admin+pe " + filepath.Join(bin, "enroot-mksquashovlfs") + " (enroot's make setcap)"})
		return
	}
	d.add(Finding{Check: "enroot helpers", Status: OK, Detail: "enroot-aufs2ovlfs and enroot-mksquashovlfs carry file capabilities (imports as this user)"})
}

// storage checks the stage base the runner's entry chooses, as execute will.
func (d *doc) storage() {
	base, err := "", d.o.Entry.StorageErr
	if err == nil {
		base, err = shard.StageBase(d.o.Entry.Storage, d.o.Entry.Runner, d.o.Getenv)
	}
	if err != nil {
		d.add(Finding{Check: "storage root", Status: Fail, Detail: err.Error(),
			Fix: "set operator.stage_dir (or storage_roots) in the platform config to a directory shared with the compute nodes"})
		return
	}
	if d.o.Entry.Container == "pyxis" {
		if err := shard.MountableStage(base); err != nil {
			d.add(Finding{Check: "storage root", Status: Fail, Detail: err.Error(),
				Fix: "set operator.stage_dir (or storage_roots) to a shared directory whose path has no ':' or ','"})
			return
		}
	}
	d.space("storage root", filepath.Dir(base), "stage base "+base, true)
}

// space checks a directory is writable (by making and removing a file) and has room.
func (d *doc) space(check, dir, how string, required bool) {
	bad := Warn
	if required {
		bad = Fail
	}
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil || probe == filepath.Dir(probe) {
			break
		}
		probe = filepath.Dir(probe) // not created yet: the nearest existing parent decides
	}
	f, err := os.CreateTemp(probe, ".opx-doctor-*")
	if err != nil {
		d.add(Finding{Check: check, Status: bad, Detail: fmt.Sprintf("%s (%s) is not writable: %v", dir, how, errors.Unwrap(err)),
			Fix: "make it writable for this account, or point the platform config / environment elsewhere"})
		return
	}
	f.Close()
	os.Remove(f.Name())
	var st syscall.Statfs_t
	if err := syscall.Statfs(probe, &st); err != nil {
		d.add(Finding{Check: check, Status: bad, Detail: err.Error()})
		return
	}
	free := st.Bavail * uint64(st.Bsize)
	detail := fmt.Sprintf("%s (%s): writable, %.1f GiB free", dir, how, float64(free)/(1<<30))
	if free < d.o.MinFree {
		d.add(Finding{Check: check, Status: bad, Detail: detail + fmt.Sprintf(", under the %.0f GiB a sweep's images and stages need", float64(d.o.MinFree)/(1<<30)),
			Fix: "free space there (old .operatorx-*/containers/*.sqsh are safe to delete when no job runs)"})
		return
	}
	d.add(Finding{Check: check, Status: OK, Detail: detail})
}

func (d *doc) binary() {
	ip := d.o.Entry.ImagePlatform
	if d.o.Binary == nil || ip == "" {
		return
	}
	p, err := d.o.Binary(ip)
	if err != nil {
		d.add(Finding{Check: "opx binary", Status: Fail, Detail: err.Error(), Fix: "build both with scripts/release.sh and keep them side by side"})
		return
	}
	d.add(Finding{Check: "opx binary", Status: OK, Detail: fmt.Sprintf("%s for %s shards", p, ip)})
}

// Failed reports whether any finding is a failure.
func Failed(fs []Finding) bool {
	for _, f := range fs {
		if f.Status == Fail {
			return true
		}
	}
	return false
}

// Write prints the findings as an aligned table, then what to do for each one not ok.
func Write(w io.Writer, runner string, fs []Finding) {
	fmt.Fprintf(w, "opx doctor: %s\n\n", runner)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Check, f.Status, f.Detail)
	}
	tw.Flush()
	var todo []string
	for _, f := range fs {
		if (f.Status == Fail || f.Status == Warn) && f.Fix != "" {
			todo = append(todo, fmt.Sprintf("  - %s (%s): %s", f.Check, f.Status, f.Fix))
		}
	}
	if len(todo) > 0 {
		fmt.Fprintf(w, "\nWhat to do:\n%s\n", strings.Join(todo, "\n"))
	}
	n := 0
	for _, f := range fs {
		if f.Status == Fail {
			n++
		}
	}
	if n == 0 {
		fmt.Fprintf(w, "\nready: nothing required is missing\n")
	} else {
		fmt.Fprintf(w, "\nnot ready: %d required check(s) failed\n", n)
	}
}
