package doctor_test

// opx doctor against the real local Slurm: all good for the loopback runner, then one
// piece missing at a time (exit 1, exactly one FAIL, naming that piece). enroot and a
// pyxis-enabled srun cannot run here; they are recording fakes (shell scripts) put first
// on PATH, and say so in their names. The real enroot 3.5 and 4.1 are in
// internal/shard's TestRealStackDoctor.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

var opxBin string

func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

// fixture is the local Slurm scripts/test.sh started, and a shared storage root.
type fixture struct {
	conf, dir, stageRoot string
}

func newFixture(t *testing.T) *fixture {
	c := &fixture{conf: testenv.SlurmConf(t), dir: t.TempDir()}
	c.stageRoot = filepath.Join(c.dir, "shared")
	os.MkdirAll(c.stageRoot, 0o755)
	return c
}

func (c *fixture) env() []string { return append(os.Environ(), "SLURM_CONF="+c.conf) }

// failures returns the CHECK column of every FAIL row.
func failures(out string) []string {
	var fs []string
	for _, l := range strings.Split(out, "\n") {
		if m := regexp.MustCompile(`^(.+?)\s{2,}FAIL\s{2,}`).FindStringSubmatch(l); m != nil {
			fs = append(fs, m[1])
		}
	}
	return fs
}

func (c *fixture) platforms(t *testing.T, operator string) string {
	p := filepath.Join(t.TempDir(), "platforms.json")
	os.WriteFile(p, []byte(`{"platforms": {"cluster:opxtest-loopback": {"cluster": "opxtest_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": `+operator+`}}}`), 0o644)
	return p
}

func TestDoctorOnLocalSlurm(t *testing.T) {
	c := newFixture(t)
	path := os.Getenv("PATH")
	doctor := func(cfg string, env []string, extra ...string) testenv.Outcome {
		cmd := exec.Command(opxBin, append([]string{"doctor", "--runner", "cluster:opxtest-loopback", "--platform-config", cfg, "--min-free-gib", "0.01"}, extra...)...)
		cmd.Env = append(c.env(), env...)
		return testenv.Run(cmd)
	}
	none := func(extra string) string {
		return c.platforms(t, `{"container": "none", "partition": "debug", "stage_dir": "`+c.stageRoot+`"`+extra+`}`)
	}
	pyxis := c.platforms(t, `{"container": "pyxis", "partition": "debug", "stage_dir": "`+c.stageRoot+`"}`)
	realSrun, _ := exec.LookPath("srun")
	pyxisSrun := `if [ "$1" = --help ]; then "` + realSrun + `" --help; echo "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH"; exit 0; fi; exec "` + realSrun + `" "$@"`
	slurmOnly := []string{"squeue", "sinfo", "salloc", "scancel", "unsquashfs"}

	r := doctor(none(""), nil)
	if r.Code != 0 || len(failures(r.Stdout)) != 0 {
		t.Fatalf("all good: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"slurm controller  ok", "slurm partition   ok      debug* up", "storage root      ok      " + c.stageRoot,
		"containers        skip", "ready: nothing required is missing"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("all-good report lacks %q:\n%s", want, r.Stdout)
		}
	}

	// --json: the same findings for scripts
	r = doctor(none(""), nil, "--json")
	var doc struct {
		Runner   string
		Ready    bool
		Findings []struct{ Check, Status, Detail, Fix string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || r.Code != 0 || !doc.Ready || doc.Runner != "cluster:opxtest-loopback" || len(doc.Findings) < 5 {
		t.Fatalf("--json: exit %d %v %+v\n%s", r.Code, err, doc, r.Stdout)
	}
	for _, f := range doc.Findings {
		if f.Check == "storage root" && (f.Status != "ok" || f.Detail == "") {
			t.Errorf("--json storage root finding %+v", f)
		}
	}

	deadConf := filepath.Join(t.TempDir(), "slurm.conf")
	b, _ := os.ReadFile(c.conf)
	os.WriteFile(deadConf, []byte(regexp.MustCompile(`(?m)^SlurmctldPort=\d+`).ReplaceAllString(string(b), "SlurmctldPort=1")), 0o644)

	for _, tc := range []struct {
		name, cfg string
		env       []string
		extra     []string
		fail      string
		detail    string
	}{
		{"no salloc on PATH", none(""), []string{"PATH=" + testenv.BinDir(t, []string{"srun", "scancel", "squeue", "sinfo"}, nil)}, nil, "slurm: salloc", "salloc not found on PATH"},
		{"controller unreachable", none(""), []string{"SLURM_CONF=" + deadConf}, nil, "slurm controller", "Unable to contact slurm controller"},
		// with pyxis too: the controller is blamed, and pyxis left for after (issue 48:
		// doctor blamed pyxis when the controller was down)
		{"controller unreachable, pyxis runner", pyxis, []string{"SLURM_CONF=" + deadConf, "PATH=" + testenv.BinDir(t, append(slurmOnly, "srun"), map[string]string{"enroot": `echo 4.1.0`}) + ":" + path}, nil, "slurm controller", "not checked: the Slurm controller does not answer"},
		{"unknown partition", c.platforms(t, `{"container": "none", "partition": "nosuch", "stage_dir": "`+c.stageRoot+`"}`), nil, nil, "slurm partition", "partition nosuch not found"},
		{"storage root missing", c.platforms(t, `{"container": "none", "partition": "debug", "stage_dir": "`+filepath.Join(c.dir, "absent")+`"}`), nil, nil, "storage root", "no writable shared storage root configured for this runner (" + filepath.Join(c.dir, "absent") + " does not exist)"},
		{"storage root full", none(""), nil, []string{"--min-free-gib", "1000000"}, "storage root", "under the 1000000 GiB"},
		{"entry without partition", c.platforms(t, `{"container": "none", "stage_dir": "`+c.stageRoot+`"}`), nil, nil, "platform entry", "lacks operator.partition"},
		{"pyxis not loaded (fake enroot 4.1)", pyxis, []string{"PATH=" + testenv.BinDir(t, append(slurmOnly, "srun"), map[string]string{"enroot": `echo 4.1.0`}) + ":" + path}, nil, "pyxis", "lists no --container-image"},
		{"enroot missing (fake pyxis srun)", pyxis, []string{"PATH=" + testenv.BinDir(t, slurmOnly, map[string]string{"srun": pyxisSrun})}, nil, "enroot", "enroot not found on PATH"},
		{"unsquashfs missing (fakes)", pyxis, []string{"PATH=" + testenv.BinDir(t, []string{"squeue", "sinfo", "salloc", "scancel"}, map[string]string{"srun": pyxisSrun, "enroot": "echo 4.1.0"})}, nil, "unsquashfs", "unsquashfs not found"},
	} {
		r := doctor(tc.cfg, tc.env, tc.extra...)
		fs := failures(r.Stdout)
		if r.Code != 1 || len(fs) != 1 || fs[0] != tc.fail || !strings.Contains(r.Stdout, tc.detail) || !strings.Contains(r.Stdout, "What to do:") {
			t.Errorf("%s: exit %d, failures %q (want exactly %q with %q)\n%s%s", tc.name, r.Code, fs, tc.fail, tc.detail, r.Stdout, r.Stderr)
		}
	}

	// enroot older than 3.5 is a warning, not a failure (3.4 cannot be built here: a fake
	// prints its version; 3.5 and 4.1 run for real in TestRealStackDoctor)
	old := testenv.BinDir(t, slurmOnly, map[string]string{"srun": pyxisSrun, "enroot": `[ "$1" = version ] && echo 3.4.0`})
	r = doctor(pyxis, []string{"PATH=" + old})
	if r.Code != 0 || !strings.Contains(r.Stdout, "enroot            warn    enroot 3.4.0: older than 3.5") || !strings.Contains(r.Stdout, "upgrade enroot to 3.5") {
		t.Errorf("enroot 3.4: exit %d\n%s", r.Code, r.Stdout)
	}
	if r := doctor(c.platforms(t, `{"container": "none", "stage_dir": "`+c.stageRoot+`"}`), nil, "--json"); r.Code != 1 || !strings.Contains(r.Stdout, `"ready": false`) {
		t.Errorf("--json with a failure: exit %d\n%s", r.Code, r.Stdout)
	}
	// an unknown runner is one line, a usage error
	cmd := exec.Command(opxBin, "doctor", "--runner", "cluster:nosuch")
	if r := testenv.Run(cmd); r.Code != 2 || !strings.Contains(r.Stderr, "unknown runner cluster:nosuch") {
		t.Errorf("unknown runner: %d %q", r.Code, r.Stderr)
	}
}
