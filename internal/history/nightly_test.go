package history_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/serve"
	"github.com/semianalysis/opx/internal/testenv"
)

// nightlyRuns are n real runs of the README's nightly example (opx run in dir), each
// started in a second of its own; the measured rows of night i are rewritten to a level
// of their own with 1% of deterministic noise, and the 512×512×512 fp64 gemm's times
// multiplied by slow[i], so the gate's answers depend on the rule alone, never on this
// machine's noise. env is added to each run's environment.
//
// The runs measure as on a machine of their own: a registry of measuring claims of their
// own (TMPDIR), so that other packages' runs of the suite are not taken for contention,
// unless env says otherwise.
func nightlyRuns(t *testing.T, dir string, slow []float64, env ...string) []string {
	t.Helper()
	env = append([]string{"TMPDIR=" + t.TempDir()}, env...)
	var runs []string
	for i, factor := range slow {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		c := exec.Command(opxBin, "run")
		c.Dir, c.Env = dir, append(os.Environ(), env...)
		o := testenv.Run(c)
		if o.Code != 0 {
			t.Fatalf("night %d: opx run: exit %d %s", i, o.Code, o.Stderr)
		}
		link, err := os.Readlink(filepath.Join(dir, ".opx-run", "latest"))
		if err != nil {
			t.Fatal(err)
		}
		run := filepath.Join(dir, ".opx-run", link)
		editRows(t, run, func(rows []any) []any {
			for j, r := range rows {
				row := r.(map[string]any)
				m, _ := row["metrics"].(map[string]any)
				if row["status"] != "ok" || m == nil {
					continue
				}
				args := row["op"].(map[string]any)["args"].(map[string]any)
				level := 1000 * float64(j+1) * (1 + 0.01*math.Sin(float64(7*i+3*j)))
				if args["m"] == 512.0 && args["k"] == 512.0 {
					level *= factor
				}
				for k := range m {
					if strings.HasPrefix(k, "latency") && strings.HasSuffix(k, "_us") {
						m[k] = level
					}
				}
			}
			return rows
		})
		runs = append(runs, run)
	}
	return runs
}

// The gate is red while a slower change stands and nobody has decided — the README's
// nightly example (opx run; opx history add .opx-run/latest; opx history check
// --fail-on-regression 5), night after night, on SQLite and PostgreSQL: a 24x slowdown
// fails on each of its first three nights (open), fails acknowledged, passes once marked
// expected; a later, larger step on the same series fails again; the series' recovery
// passes. --new-only keeps the first night's rule.
func TestGateStandsUntilSomeoneDecides(t *testing.T) {
	dir := t.TempDir()
	slow := []float64{1, 1, 1, 1, 1, 1, 24, 24, 24, 24, 24, 72, 72, 1}
	runs := nightlyRuns(t, dir, slow)
	const (
		open = iota
		acknowledge
		expect
	)
	type night struct {
		before int // a triage before the night's check: of the change the gate failed on last
		code   int
		says   string
	}
	plan := map[int]night{
		6:  {code: 1, says: "standing at run local"},
		7:  {code: 1, says: "(open): release it with opx history triage"},
		8:  {code: 1, says: "x slower now, since run"},
		9:  {before: acknowledge, code: 1, says: "(acknowledged)"},
		10: {before: expect, code: 0},
		11: {code: 1, says: "3.0"}, // a later, larger step: a change of its own
		12: {code: 1},
		13: {code: 0}, // recovered
	}
	for _, name := range []string{"SQLite", "PostgreSQL"} {
		t.Run(name, func(t *testing.T) {
			db := "" // the README's: opx-history.db in the working directory
			if name == "PostgreSQL" {
				db = testenv.Postgres(t)
			}
			work := t.TempDir()
			os.Symlink(filepath.Join(dir, ".opx-run"), filepath.Join(work, ".opx-run"))
			in := func(args ...string) testenv.Outcome {
				if db != "" {
					args = append(args, "--db", db)
				}
				c := exec.Command(opxBin, args...)
				c.Dir = work
				return testenv.Run(c)
			}
			js := filepath.Join(t.TempDir(), "c.json")
			lastID := ""
			for i, run := range runs {
				latest := filepath.Join(dir, ".opx-run", "latest")
				os.Remove(latest)
				os.Symlink(filepath.Base(run), latest)
				if o := in("history", "add", ".opx-run/latest"); o.Code != 0 {
					t.Fatalf("night %d: add: exit %d %s", i, o.Code, o.Stderr)
				}
				want, ok := plan[i]
				switch want.before {
				case acknowledge, expect:
					state := map[int]string{acknowledge: "acknowledged", expect: "expected"}[want.before]
					if o := in("history", "triage", lastID, "--state", state); o.Code != 0 {
						t.Fatalf("night %d: triage %s %s: exit %d %s", i, lastID, state, o.Code, o.Stderr)
					}
				}
				o := in("history", "check", "--fail-on-regression", "5", "--json", js)
				if !ok {
					if o.Code != 0 {
						t.Errorf("quiet night %d: exit %d %s%s", i, o.Code, o.Stdout, o.Stderr)
					}
					continue
				}
				if o.Code != want.code || !strings.Contains(o.Stderr, want.says) {
					t.Errorf("night %d (%gx): exit %d %q, want exit %d saying %q", i, slow[i], o.Code, o.Stderr, want.code, want.says)
				}
				if want.code == 1 && !strings.Contains(o.Stdout, "**Fails the gate**") {
					t.Errorf("night %d: the Markdown does not list what fails the gate:\n%s", i, o.Stdout)
				}
				if want.code == 1 {
					var f struct{ Changes []history.Change }
					b, _ := os.ReadFile(js)
					json.Unmarshal(b, &f)
					for _, c := range f.Changes {
						if c.Direction == "slower" && c.Holds && (c.Triage == "open" || c.Triage == "acknowledged") {
							lastID = c.ID
						}
					}
				}
				if i == 8 { // the first night's rule, kept behind --new-only
					if o := in("history", "check", "--fail-on-regression", "5", "--new-only"); o.Code != 0 {
						t.Errorf("night 8, --new-only: exit %d %s", o.Code, o.Stderr)
					}
				}
			}
		})
	}
}

// A night whose check did not run, and two sweeps' runs added before either check: the
// gate judges every run added since the last gate, so the regression still fails the next
// check.
func TestGateJudgesEveryRunSinceTheLast(t *testing.T) {
	dir := t.TempDir()
	runs := nightlyRuns(t, dir, []float64{1, 1, 1, 1, 1, 1, 3, 1})
	db := filepath.Join(t.TempDir(), "h.db")
	for i, run := range runs[:6] {
		if o := opx("history", "add", "--db", db, run); o.Code != 0 {
			t.Fatalf("night %d: %s", i, o.Stderr)
		}
		if o := opx("history", "check", "--db", db, "--fail-on-regression", "5"); o.Code != 0 {
			t.Fatalf("quiet night %d: exit %d %s", i, o.Code, o.Stderr)
		}
	}
	// the 3x run is added; its check dies; another sweep's run (every case as before,
	// the same series on another machine) is added after it
	if o := opx("history", "add", "--db", db, runs[6]); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	other := onAnotherNode(t, runs[7], filepath.Join(t.TempDir(), "other"), "other-sweep")
	if o := opx("history", "add", "--db", db, other); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	o := opx("history", "check", "--db", db, "--fail-on-regression", "5")
	if o.Code != 1 || !strings.Contains(o.Stderr, "x slower now") {
		t.Errorf("the next check after a check that did not run: exit %d %s", o.Code, o.Stderr)
	}
}

// A team moving its store: opx history copy takes a SQLite store into PostgreSQL and back
// with every run, point and triage event and the gate's place, counted on both sides; the
// loop goes on in the copy as in the original (the same changes, ids and triage states,
// the same gate), and a copy into a store that holds a history is refused, untouched.
func TestCopyCarriesTheLoop(t *testing.T) {
	dir := t.TempDir()
	runs := nightlyRuns(t, dir, []float64{1, 1, 1, 1, 1, 1, 24, 24})
	a := filepath.Join(t.TempDir(), "a.db")
	for _, run := range runs[:7] {
		if o := opx("history", "add", "--db", a, run); o.Code != 0 {
			t.Fatal(o.Stderr)
		}
	}
	js := filepath.Join(t.TempDir(), "c.json")
	changed := func(db string) (int, []history.Change) {
		t.Helper()
		o := opx("history", "check", "--db", db, "--fail-on-regression", "5", "--json", js)
		var f struct{ Changes []history.Change }
		b, err := os.ReadFile(js)
		if err != nil || json.Unmarshal(b, &f) != nil || len(f.Changes) == 0 {
			t.Fatalf("check --db %s: exit %d %s: no changes in %s", db, o.Code, o.Stderr, b)
		}
		return o.Code, f.Changes
	}
	code, before := changed(a)
	if code != 1 {
		t.Fatalf("the 24x night passes the gate: exit %d", code)
	}
	if o := opx("history", "triage", "--db", a, before[0].ID[:6], "--state", "acknowledged"); o.Code != 0 || !strings.Contains(o.Stderr, before[0].ID+": open → acknowledged") { // a unique start of its id names it
		t.Fatal(o.Stderr)
	}
	_, before = changed(a)
	pg := testenv.Postgres(t)
	b := filepath.Join(t.TempDir(), "b.db")
	for _, step := range [][2]string{{a, pg}, {pg, b}} {
		o := opx("history", "copy", "--from", step[0], "--to", step[1])
		if o.Code != 0 || !strings.Contains(o.Stderr, "7 runs, 6 series, 42 points, 0 confirmation points, 1 triage events") {
			t.Fatalf("copy %s → %s: exit %d %s", step[0], step[1], o.Code, o.Stderr)
		}
	}
	for _, db := range []string{pg, b} {
		if _, got := changed(db); !reflect.DeepEqual(got, before) {
			t.Errorf("the copy %s judges otherwise:\n got %+v\nwant %+v", db, got, before)
		}
		// the next night goes on where the original left off
		if o := opx("history", "add", "--db", db, runs[7]); o.Code != 0 {
			t.Fatal(o.Stderr)
		}
		if o := opx("history", "check", "--db", db, "--fail-on-regression", "5"); o.Code != 1 || !strings.Contains(o.Stderr, "(acknowledged)") {
			t.Errorf("the next night on the copy %s: exit %d %s", db, o.Code, o.Stderr)
		}
	}
	o := opx("history", "copy", "--from", a, "--to", pg)
	if o.Code != 1 || !strings.Contains(o.Stderr, "already holds a history") {
		t.Errorf("a copy into a store that holds a history: exit %d %s", o.Code, o.Stderr)
	}
	if _, got := changed(pg); len(got) != len(before) {
		t.Errorf("the refused copy changed the store: %d changes, want %d", len(got), len(before))
	}
}

// Contention travels with the rows: a run measured on a busy machine (a load above what
// OPX_BUSY_LOAD allows: here any load) warns before it measures, and its rows say so in
// the case ledger, export, compare (Markdown, JSON, JUnit: its own gate reason, never a
// plain regression and never a silent pass) and the history store, where check opens no
// change on them and the gate asks for them again; the next quiet night at the old level
// passes. opx doctor --runner local warns of the busy machine too.
func TestContentionTravelsWithTheRows(t *testing.T) {
	dir := t.TempDir()
	quiet := nightlyRuns(t, dir, []float64{1, 1, 1, 1, 1, 1})
	busy := nightlyRuns(t, dir, []float64{3}, "OPX_BUSY_LOAD=0.01")[0]
	after := nightlyRuns(t, dir, []float64{1})[0]
	js, xml := filepath.Join(t.TempDir(), "c.json"), filepath.Join(t.TempDir(), "c.xml")

	// compare: its own reason, on stderr, in the Markdown, JSON and JUnit
	o := opx("compare", quiet[5], busy, "--fail-on-regression", "5", "--json", js, "--junit", xml)
	if o.Code != 1 || !strings.Contains(o.Stderr, "measured under contention: re-measure") || strings.Contains(o.Stderr, "broken, or missing from NEW") ||
		!strings.Contains(o.Stdout, "**Measured under contention:** 0 base and 6 new row(s)") {
		t.Errorf("compare against a contended run: exit %d\n%s\n%s", o.Code, o.Stderr, o.Stdout)
	}
	var cmp struct {
		Contended map[string]int `json:"contended_rows"`
		Cases     []struct {
			Class     string   `json:"class"`
			Contended []string `json:"contended"`
		} `json:"cases"`
	}
	b, _ := os.ReadFile(js)
	if err := json.Unmarshal(b, &cmp); err != nil || cmp.Contended["new"] != 6 || cmp.Cases[0].Class != "slower" || !reflect.DeepEqual(cmp.Cases[0].Contended, []string{"new"}) {
		t.Errorf("compare --json: %v %.600s", err, b)
	}
	if x, _ := os.ReadFile(xml); !strings.Contains(string(x), `type="contended"`) || !strings.Contains(string(x), "measured under contention (new): re-measure") {
		t.Errorf("compare --junit names no contended failure:\n%s", x)
	}
	// the case ledger and export carry it
	if l, _ := os.ReadFile(filepath.Join(busy, "cases.json")); strings.Count(string(l), `"contended":"the machine's load was`) != 6 {
		t.Errorf("cases.json does not carry the contention:\n%.800s", l)
	}
	csv := filepath.Join(t.TempDir(), "x.csv")
	if o := opx("export", busy, "--out", csv); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	if x, _ := os.ReadFile(csv); !strings.Contains(strings.SplitN(string(x), "\n", 2)[0], ",throttled,contended,") || strings.Count(string(x), "the machine's load was") != 6 {
		t.Errorf("export has no contended column:\n%.600s", x)
	}

	// history: no change opened on it; the gate asks for it again; the next quiet night passes
	db := filepath.Join(t.TempDir(), "h.db")
	for _, run := range append(quiet, busy) {
		if o := opx("history", "add", "--db", db, run); o.Code != 0 {
			t.Fatal(o.Stderr)
		}
	}
	o = opx("history", "check", "--db", db, "--fail-on-regression", "5", "--json", js)
	var f struct {
		Changes   []history.Change    `json:"changes"`
		Contended []history.Contended `json:"contended"`
	}
	b, _ = os.ReadFile(js)
	json.Unmarshal(b, &f)
	if o.Code != 1 || !strings.Contains(o.Stderr, "measured under contention: re-measure") || len(f.Changes) != 0 || len(f.Contended) != 4 ||
		!strings.Contains(o.Stdout, "**Measured under contention**") {
		t.Errorf("check of a contended 3x night: exit %d %s, %d changes, %d contended\n%s", o.Code, o.Stderr, len(f.Changes), len(f.Contended), o.Stdout)
	}
	if o := opx("history", "add", "--db", db, after); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	o = opx("history", "check", "--db", db, "--fail-on-regression", "5", "--json", js)
	b, _ = os.ReadFile(js)
	f.Changes = nil
	json.Unmarshal(b, &f)
	if o.Code != 0 || len(f.Changes) != 0 {
		t.Errorf("the quiet night after: exit %d %s, changes %+v", o.Code, o.Stderr, f.Changes)
	}

	// a contended base is no baseline: a new run 2.5x slower than the quiet level but faster
	// than the contended 3x base still fails the gate, for the contention
	slower := nightlyRuns(t, dir, []float64{2.5})[0]
	o = opx("compare", busy, slower, "--fail-on-regression", "5")
	if o.Code != 1 || !strings.Contains(o.Stderr, "measured under contention: re-measure: 4 case(s) cannot be judged") || !strings.Contains(o.Stderr, "measured under contention (base): re-measure") {
		t.Errorf("compare against a contended base: exit %d\n%s", o.Code, o.Stderr)
	}
	// a machine always busy never gates silently: with no quiet run to judge by, it fails
	lone := filepath.Join(t.TempDir(), "lone.db")
	opx("history", "add", "--db", lone, busy)
	if o := opx("history", "check", "--db", lone, "--fail-on-regression", "5"); o.Code != 1 || !strings.Contains(o.Stderr, "no quiet run of it to judge it by") {
		t.Errorf("a store of contended runs only: exit %d %s", o.Code, o.Stderr)
	}
	// a regression that stands is not released by a contended night: it is no evidence of
	// a recovery
	standing := filepath.Join(t.TempDir(), "standing.db")
	for _, run := range append(append(quiet, nightlyRuns(t, dir, []float64{24, 24})...), nightlyRuns(t, dir, []float64{24}, "OPX_BUSY_LOAD=0.01")...) {
		opx("history", "add", "--db", standing, run)
		o = opx("history", "check", "--db", standing, "--fail-on-regression", "5")
	}
	if o.Code != 1 || !strings.Contains(o.Stderr, "standing at run") {
		t.Errorf("a standing 24x regression on a contended night: exit %d %s", o.Code, o.Stderr)
	}

	// opx run and doctor warn of a busy machine before anything is measured
	c := exec.Command(opxBin, "run", "--out", filepath.Join(t.TempDir(), "run"))
	c.Env = append(os.Environ(), "OPX_BUSY_LOAD=0.01")
	if o := testenv.Run(c); o.Code != 0 || !strings.Contains(o.Stderr, "this machine is busy (the machine's load is") {
		t.Errorf("opx run on a busy machine: exit %d\n%s", o.Code, o.Stderr)
	}
	c = exec.Command(opxBin, "doctor", "--runner", "local")
	c.Env = append(os.Environ(), "OPX_BUSY_LOAD=0.01")
	if o := testenv.Run(c); !strings.Contains(o.Stdout+o.Stderr, "quiet machine") || !strings.Contains(o.Stdout+o.Stderr, "the machine's load is") {
		t.Errorf("doctor on a busy machine: exit %d\n%s%s", o.Code, o.Stdout, o.Stderr)
	}
}

// The team's pinned CI opx beside a newer one: opx at 7c762cf (history schema 3, before
// contention was kept) adds nights to a store this opx has opened and revised, and both
// judge it alike — a revision an older opx can ignore never locks it out — and every
// series continues across the two writers, judged, not split or started over.
func TestOlderWriterBesideANewerStore(t *testing.T) {
	older := testenv.OlderOpx(t, "7c762cf")
	dir := t.TempDir()
	runs := nightlyRuns(t, dir, []float64{1, 1, 1, 1, 1, 1, 24})
	db := filepath.Join(t.TempDir(), "h.db")
	with := func(bin string, args ...string) testenv.Outcome {
		return testenv.Run(exec.Command(bin, append(args, "--db", db)...))
	}
	for i, run := range runs {
		bin := older
		if i == 3 || i == 6 {
			bin = opxBin // the newer opx revises the store on its first add
		}
		if o := with(bin, "history", "add", run); o.Code != 0 {
			t.Fatalf("night %d: add by %s: exit %d %s", i, bin, o.Code, o.Stderr)
		}
		if o := with(older, "history", "check"); o.Code != 0 {
			t.Fatalf("night %d: the older opx cannot read the store: exit %d %s", i, o.Code, o.Stderr)
		}
		if i == 3 { // the newer opx reads and serves it too, before the older writes again
			if o := with(opxBin, "history", "check"); o.Code != 0 {
				t.Fatalf("night %d: check: exit %d %s", i, o.Code, o.Stderr)
			}
			served(t, db)
		}
	}
	js := filepath.Join(t.TempDir(), "c.json")
	for _, bin := range []string{opxBin, older} {
		o := with(bin, "history", "check", "--fail-on-regression", "5", "--json", js)
		var f struct {
			Series  int                   `json:"series"`
			Young   []history.YoungSeries `json:"young"`
			Changes []history.Change      `json:"changes"`
		}
		b, _ := os.ReadFile(js)
		json.Unmarshal(b, &f)
		if o.Code != 1 || f.Series != 6 || len(f.Young) != 0 || len(f.Changes) != 1 {
			t.Errorf("%s's check of the shared store: exit %d, %d series, %d young, %d changes\n%s", bin, o.Code, f.Series, len(f.Young), len(f.Changes), o.Stderr)
		}
	}
}

// An upgrade keeps series whole: opx at 2b8db26 (before local runs were keyed by their
// machine) records four nights of the README's example as series of cluster "local"; this
// opx's first add re-keys them by the machine that measured them (local@HOST), so the
// nights after continue the same six series — judged, not young, none left under "local" —
// and the regression of the last night is found on them.
func TestUpgradeKeepsSeriesWhole(t *testing.T) {
	older := testenv.OlderOpx(t, "2b8db26")
	dir := t.TempDir()
	runs := nightlyRuns(t, dir, []float64{1, 1, 1, 1, 1, 1, 24})
	db := filepath.Join(t.TempDir(), "h.db")
	for i, run := range runs {
		bin := opxBin
		if i < 4 {
			bin = older
		}
		if o := testenv.Run(exec.Command(bin, "history", "add", "--db", db, run)); o.Code != 0 {
			t.Fatalf("night %d: add by %s: exit %d %s", i, bin, o.Code, o.Stderr)
		}
	}
	js := filepath.Join(t.TempDir(), "c.json")
	o := opx("history", "check", "--db", db, "--all", "--fail-on-regression", "5", "--json", js)
	var f struct {
		Series  int                   `json:"series"`
		Young   []history.YoungSeries `json:"young"`
		Changes []history.Change      `json:"changes"`
	}
	b, _ := os.ReadFile(js)
	json.Unmarshal(b, &f)
	if o.Code != 1 || f.Series != 6 || len(f.Young) != 0 || len(f.Changes) != 1 || !strings.Contains(f.Changes[0].Key, "| local@") {
		t.Errorf("after the upgrade: exit %d, %d series, %d young, changes %+v\n%s", o.Code, f.Series, len(f.Young), f.Changes, o.Stderr)
	}
	if strings.Contains(string(b), `| local"`) {
		t.Errorf("a series is left under cluster local:\n%.600s", b)
	}
}

// served opens the store as opx serve does, serves one request of every page it reads
// with, and stops.
func served(t *testing.T, db string) {
	t.Helper()
	st, err := history.OpenReader(t.Context(), db, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, serve.Options{Store: st, Where: st.Where, Listen: "127.0.0.1:0", Ready: func(a string) { ready <- a }})
	}()
	addr := <-ready
	for _, p := range []string{"/", "/runs", "/api/changes", "/healthz"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("serving %s: %v %v", p, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
