package history_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for a session of our own

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/testenv"
)

var opxBin string

func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

func opx(args ...string) testenv.Outcome { return testenv.Run(exec.Command(opxBin, args...)) }

// A real run of this machine (opx run, the cpu backend) recorded as a user records it:
// every case with its verdict, a second add of the same run writes nothing and says so, a
// second run is a second point of each series, and check reads them back — on SQLite and
// on PostgreSQL.
func TestAddARealRun(t *testing.T) {
	dir := t.TempDir()
	runs := []string{filepath.Join(dir, "run1"), filepath.Join(dir, "run2")}
	for _, r := range runs {
		if o := opx("run", "--out", r); o.Code != 0 {
			t.Fatalf("opx run: exit %d\n%s", o.Code, o.Stderr)
		}
	}
	for _, db := range []string{filepath.Join(dir, "h.db"), testenv.Postgres(t)} {
		o := opx("history", "add", "--db", db, runs[0])
		if o.Code != 0 || !strings.Contains(o.Stderr, "6 cases (4 measured) recorded") || !strings.Contains(o.Stderr, "the check of the newest run kept for opx serve (6 series judged in ") {
			t.Fatalf("add: exit %d\n%s", o.Code, o.Stderr)
		}
		o = opx("history", "add", "--db", db, runs[0], runs[1])
		if o.Code != 0 || !strings.Contains(o.Stderr, "is already in") || !strings.Contains(o.Stderr, "run2: run local") {
			t.Fatalf("add again: exit %d\n%s", o.Code, o.Stderr)
		}
		js := filepath.Join(t.TempDir(), "changes.json")
		o = opx("history", "check", "--db", db, "--json", js, "--fail-on-regression", "5")
		if o.Code != 0 || !strings.Contains(o.Stdout, "6 series (12 points) checked") {
			t.Fatalf("check: exit %d\n%s%s", o.Code, o.Stdout, o.Stderr)
		}
		if b, err := os.ReadFile(js); err != nil || !strings.Contains(string(b), `"series": 6`) {
			t.Fatalf("check --json: %v %s", err, b)
		}
		// a filter that matches nothing judges nothing: the gate fails, naming what exists
		o = opx("history", "check", "--db", db, "--filter", "backend=vllm", "--fail-on-regression", "5")
		if o.Code != 1 || !strings.Contains(o.Stderr, "--filter matches no series") || !strings.Contains(o.Stderr, "backend: cpu") {
			t.Errorf("a filter of nothing: exit %d\n%s", o.Code, o.Stderr)
		}
	}
	// a local run's time is CPU time, on every page: as added, and as a store of before
	// the unit was recorded holds it
	for _, tally := range []string{"", `{"backends": {"cpu": [4, 2, 0, 0]}, "gpu_ms": 1000}`} {
		if tally != "" {
			db, err := sql.Open("sqlite", filepath.Join(dir, "h.db"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Exec("UPDATE runs SET tally = ?", tally)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		s, err := history.Open(t.Context(), filepath.Join(dir, "h.db"), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s.RunList(t.Context())
		var cases []history.CasePoint
		if err == nil {
			cases, err = s.RunCases(t.Context(), runs[0].ID)
		}
		s.Close()
		if err != nil || len(runs) != 2 || runs[0].Unit != "CPU" || runs[1].Unit != "CPU" || len(cases) != 6 || cases[0].Unit != "CPU" {
			t.Errorf("a local run's time (tally %q): %v %+v", tally, err, runs)
		}
	}
	// the same run again with another --at: nothing written, and said at the time the
	// store holds it
	held := filepath.Join(dir, "held.db")
	opx("history", "add", "--db", held, "--at", "2026-11-01T02:00:00Z", runs[0])
	if o := opx("history", "add", "--db", held, "--at", "2026-11-02T02:00:00Z", runs[0]); o.Code != 0 || !strings.Contains(o.Stderr, "of 2026-11-01T02:00:00Z is already in") {
		t.Errorf("re-added with another --at: exit %d %q", o.Code, o.Stderr)
	}
	// a run dated after now is refused before any store is made
	db := filepath.Join(dir, "future.db")
	o := opx("history", "add", "--db", db, "--at", time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339), runs[0])
	if o.Code != 1 || !strings.Contains(o.Stderr, "after now: a clock skew or an --at typo?") {
		t.Errorf("a future run: exit %d %q", o.Code, o.Stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused add left a store behind")
	}
}

// A gate over nothing fails: a store with no run, a failed add (which leaves no store), a
// file that is not a store (a 0-byte one included: left as it is); a threshold that is not
// a finite percentage above 0, and a store URL of another database, are usage errors.
func TestGatesOverNothing(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	s, err := history.Open(t.Context(), empty, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	o := opx("history", "check", "--db", empty, "--fail-on-regression", "5")
	if o.Code != 1 || !strings.Contains(o.Stderr, "holds no run: nothing to judge, the gate fails") {
		t.Errorf("an empty store: exit %d %q", o.Code, o.Stderr)
	}
	db := filepath.Join(dir, "h.db")
	o = opx("history", "add", "--db", db, filepath.Join(dir, "no-such-run"))
	if _, err := os.Stat(db); o.Code != 1 || err == nil {
		t.Errorf("a failed add: exit %d %q; store left: %v", o.Code, o.Stderr, err == nil)
	}
	zero := filepath.Join(dir, "zero.db")
	os.WriteFile(zero, nil, 0o644)
	for _, cmd := range [][]string{{"check", "--fail-on-regression", "5"}, {"report", "--out", filepath.Join(dir, "p.html")}} {
		o = opx(append(append([]string{"history"}, cmd...), "--db", zero)...)
		if st, _ := os.Stat(zero); o.Code != 1 || !strings.Contains(o.Stderr, "not an opx history store: an empty file") || st.Size() != 0 {
			t.Errorf("history %s on a 0-byte file: exit %d %q", cmd[0], o.Code, o.Stderr)
		}
	}
	for _, pct := range []string{"NaN", "0", "-5", "Inf"} {
		if o = opx("history", "check", "--db", empty, "--fail-on-regression", pct); o.Code != 2 || !strings.Contains(o.Stderr, "finite percentage above 0") {
			t.Errorf("history check --fail-on-regression %s: exit %d %q", pct, o.Code, o.Stderr)
		}
		if o = opx("compare", dir, dir, "--fail-on-regression", pct); o.Code != 2 || !strings.Contains(o.Stderr, "finite percentage above 0") {
			t.Errorf("compare --fail-on-regression %s: exit %d %q", pct, o.Code, o.Stderr)
		}
	}
	// an output is never the store (nor its journal): refused before it is opened
	before, _ := os.ReadFile(empty)
	for _, args := range [][]string{{"check", "--json", empty}, {"check", "--confirm-manifest", empty + "-wal"}, {"report", "--out", empty}} {
		o = opx(append(append([]string{"history"}, args...), "--db", empty)...)
		if after, _ := os.ReadFile(empty); o.Code != 2 || !strings.Contains(o.Stderr, "is the history store, an input") || string(after) != string(before) {
			t.Errorf("history %v: exit %d %q", args, o.Code, o.Stderr)
		}
	}
	for _, args := range [][]string{{"check", "--lookback", "0"}, {"check", "--lookback", "-3"}, {"report", "--lookback", "2"}, {"check", "--db-timeout", "-1s"}, {"add", "--db-timeout", "0s", dir}} {
		o = opx(append(append([]string{"history"}, args...), "--db", empty)...)
		if o.Code != 2 || !strings.Contains(o.Stderr, "--"+strings.TrimPrefix(args[1], "--")) {
			t.Errorf("history %v: exit %d %q", args, o.Code, o.Stderr)
		}
	}
	if o = opx("history", "check", "--db", "mysql://opx@db/opx"); o.Code != 2 || !strings.Contains(o.Stderr, "give a SQLite file path (or sqlite:PATH) or a postgres:// URL") {
		t.Errorf("a mysql:// store: exit %d %q", o.Code, o.Stderr)
	}
}

// What is not a store is refused with one line and left as it was; a server that does not
// answer fails within seconds, naming its host.
func TestBadStores(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.db")
	os.WriteFile(notes, []byte("my notes\n"), 0o644)
	o := opx("history", "check", "--db", notes)
	if o.Code != 1 || !strings.Contains(o.Stderr, "not an opx history store") || strings.Count(strings.TrimSpace(o.Stderr), "\n") != 0 {
		t.Errorf("a text file: exit %d %q", o.Code, o.Stderr)
	}
	if b, _ := os.ReadFile(notes); string(b) != "my notes\n" {
		t.Errorf("the file was changed: %q", b)
	}
	o = opx("history", "check", "--db", "postgres://opx@127.0.0.1:1/opx?sslmode=disable")
	if o.Code != 1 || !strings.Contains(o.Stderr, "127.0.0.1:1") || !strings.Contains(o.Stderr, "cannot be reached") {
		t.Errorf("an unreachable server: exit %d %q", o.Code, o.Stderr)
	}
	o = opx("history", "add", "--at", "yesterday", dir)
	if o.Code != 2 || !strings.Contains(o.Stderr, "RFC 3339") {
		t.Errorf("a bad --at: exit %d %q", o.Code, o.Stderr)
	}
}

// The confirmation loop on this machine: nine runs, then one with five times the work
// (OPERATORX_CPU_REPEAT=5) whose cases are suspects and fail the gate; check writes the
// confirmation manifest, opx run --manifest runs it, and adding that run settles them:
// cleared as noise when it measures the old level (the gate then passes), confirmed when it
// measures the new one (the gate still fails). The same history on SQLite and PostgreSQL.
func TestConfirmationSettlesSuspects(t *testing.T) {
	dir := t.TempDir()
	quick := []string{"OPERATORX_MEASURE_S=0.05", "GOMAXPROCS=1"}
	run := func(out string, env ...string) {
		t.Helper()
		cmd := exec.Command(opxBin, "run", "--out", out)
		cmd.Env = append(append(os.Environ(), quick...), env...)
		if o := testenv.Run(cmd); o.Code != 0 {
			t.Fatalf("opx run %s: exit %d\n%s", out, o.Code, o.Stderr)
		}
	}
	var runs []string
	for i := range 10 {
		r := filepath.Join(dir, "run"+strconv.Itoa(i))
		if i < 9 {
			run(r)
		} else {
			run(r, "OPERATORX_CPU_REPEAT=5")
		}
		runs = append(runs, r)
	}
	for _, c := range []struct {
		name, db string
		env      []string
		status   string
	}{
		{"noise", filepath.Join(dir, "a.db"), nil, "cleared"},
		{"real", testenv.Postgres(t), []string{"OPERATORX_CPU_REPEAT=5"}, "confirmed"},
	} {
		if o := opx(append([]string{"history", "add", "--db", c.db}, runs...)...); o.Code != 0 {
			t.Fatalf("%s: add: %s", c.name, o.Stderr)
		}
		conf := filepath.Join(dir, c.name+"-confirm.json")
		o := opx("history", "check", "--db", c.db, "--confirm-manifest", conf, "--fail-on-regression", "50")
		// the four measured cases took five times as long in the newest run; this test is of
		// the confirmation loop, not of the detector's power (history-bench measures that):
		// on a VM loaded by the rest of the suite some of them may hide in noise the
		// history has already seen, or may have moved in the run before (a suspect of that
		// run), so it asks for one suspect at least and settles every one there is
		var n int
		if i := strings.Index(o.Stderr, ".json: "); i < 0 || o.Code != 1 {
			t.Fatalf("%s: check: exit %d\n%s%s", c.name, o.Code, o.Stdout, o.Stderr)
		} else if _, err := fmt.Sscanf(o.Stderr[i+7:], "%d suspect case(s)", &n); err != nil || n < 1 {
			t.Fatalf("%s: check: exit %d, %d suspects\n%s%s", c.name, o.Code, n, o.Stdout, o.Stderr)
		}
		out := filepath.Join(dir, c.name+"-confirm")
		cmd := exec.Command(opxBin, "run", "--manifest", conf, "--out", out)
		cmd.Env = append(append(os.Environ(), quick...), c.env...)
		if r := testenv.Run(cmd); r.Code != 0 || !strings.Contains(r.Stderr, "the local runner is this one machine") {
			t.Fatalf("%s: opx run --manifest: exit %d\n%s", c.name, r.Code, r.Stderr)
		}
		if o := opx("history", "add", "--db", c.db, out); o.Code != 0 || !strings.Contains(o.Stderr, fmt.Sprintf("a confirmation of run local's suspects: %d cases (%d measured)", n, n)) {
			t.Fatalf("%s: add the confirmation: exit %d %s", c.name, o.Code, o.Stderr)
		}
		js := filepath.Join(dir, c.name+".json")
		o = opx("history", "check", "--db", c.db, "--json", js, "--fail-on-regression", "50")
		var doc struct {
			Changes []struct{ Status, Confirmation string }
			Cleared []struct{ Reason string }
		}
		b, _ := os.ReadFile(js)
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch c.status {
		case "cleared":
			if len(doc.Cleared) != n || doc.Cleared[0].Reason != "noise" || o.Code != 0 {
				t.Errorf("noise: exit %d, %s\n%s", o.Code, b, o.Stdout)
			}
		case "confirmed":
			if o.Code != 1 || len(doc.Changes) < n || doc.Changes[0].Status != "confirmed" || !strings.HasPrefix(doc.Changes[0].Confirmation, "confirmed by run confirm-local") {
				t.Errorf("real: exit %d, %s\n%s", o.Code, b, o.Stdout)
			}
		}
	}
}

// Parallel adds, as a workflow's jobs make them: four opx processes adding four runs to one
// fresh store at once all succeed, and the store holds every run once.
func TestParallelAdds(t *testing.T) {
	dir := t.TempDir()
	var runs []string
	for i := range 4 {
		r := filepath.Join(dir, "run"+strconv.Itoa(i))
		cmd := exec.Command(opxBin, "run", "--out", r)
		cmd.Env = append(os.Environ(), "OPERATORX_MEASURE_S=0.02")
		if o := testenv.Run(cmd); o.Code != 0 {
			t.Fatalf("opx run: exit %d\n%s", o.Code, o.Stderr)
		}
		runs = append(runs, r)
	}
	for _, db := range []string{filepath.Join(dir, "h.db"), testenv.Postgres(t)} {
		var wg sync.WaitGroup
		outs := make([]testenv.Outcome, len(runs))
		for i, r := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = opx("history", "add", "--db", db, r)
			}()
		}
		wg.Wait()
		for i, o := range outs {
			if o.Code != 0 || !strings.Contains(o.Stderr, "recorded in") {
				t.Errorf("%s: add %d: exit %d %s", db, i, o.Code, o.Stderr)
			}
		}
		o := opx("history", "check", "--db", db, "--all")
		if !strings.Contains(o.Stdout, "6 series (24 points) checked") {
			t.Errorf("%s: after four parallel adds: %s%s", db, o.Stdout, o.Stderr)
		}
	}
}

// The README's history lines run as written: opx run keeps .opx-run/latest (a relative
// link) at its newest run, and a run named through a link is read as the run itself by
// every command; a link planted inside a run is refused, and said, never read as missing.
// Two machines' local runs of one case are two series (local@HOST).
func TestREADMEHistoryAndLinks(t *testing.T) {
	dir := t.TempDir()
	in := func(args ...string) testenv.Outcome {
		c := exec.Command(opxBin, args...)
		c.Dir = dir
		return testenv.Run(c)
	}
	if o := in("run"); o.Code != 0 {
		t.Fatalf("opx run: exit %d %s", o.Code, o.Stderr)
	}
	first, err := os.Readlink(filepath.Join(dir, ".opx-run", "latest"))
	if err != nil || filepath.IsAbs(first) {
		t.Fatalf(".opx-run/latest: %q %v, want a relative link", first, err)
	}
	if o := in("history", "add", ".opx-run/latest"); o.Code != 0 || !strings.Contains(o.Stderr, "6 cases (4 measured) recorded in opx-history.db") {
		t.Fatalf("opx history add .opx-run/latest: exit %d %s", o.Code, o.Stderr)
	}
	if o := in("history", "check", "--fail-on-regression", "5"); o.Code != 0 || !strings.Contains(o.Stdout, "6 series (6 points) checked") {
		t.Fatalf("opx history check --fail-on-regression 5: exit %d %s%s", o.Code, o.Stdout, o.Stderr)
	}
	if o := in("history", "report", "--out", "history.html"); o.Code != 0 {
		t.Fatalf("opx history report: exit %d %s", o.Code, o.Stderr)
	}
	time.Sleep(1100 * time.Millisecond) // a run directory is named by its second
	if o := in("run"); o.Code != 0 {
		t.Fatalf("opx run again: exit %d %s", o.Code, o.Stderr)
	}
	second, _ := os.Readlink(filepath.Join(dir, ".opx-run", "latest"))
	if second == first || second == "" {
		t.Errorf(".opx-run/latest still %q after a second run", second)
	}
	// every reader, through a link and directly: the same verdict
	run := filepath.Join(dir, ".opx-run", second)
	link := filepath.Join(dir, "mine")
	os.Symlink(run, link)
	for _, cmd := range [][]string{{"report", "--out", filepath.Join(dir, "r.html")}, {"export", "--out", filepath.Join(dir, "e.csv")}} {
		direct := in(append(cmd, run)...)
		linked := in(append(cmd, link)...)
		if direct.Code != 0 || linked.Code != direct.Code || !strings.Contains(linked.Stderr, "success: 4 of 6 cases measured") {
			t.Errorf("%s through a link: exit %d %q; directly: exit %d %q", cmd[0], linked.Code, linked.Stderr, direct.Code, direct.Stderr)
		}
	}
	if o := in("history", "add", "--db", filepath.Join(dir, "l.db"), link); !strings.Contains(o.Stderr, "6 cases (4 measured)") {
		t.Errorf("history add through a link: exit %d %s", o.Code, o.Stderr)
	}
	planted := filepath.Join(run, "shards", "planted")
	os.Symlink("/etc", planted)
	if o := in("report", "--out", filepath.Join(dir, "r2.html"), run); o.Code == 0 || !strings.Contains(o.Stderr, "a symbolic link inside the run: opx never follows one") {
		t.Errorf("a link planted in a run: exit %d %q", o.Code, o.Stderr)
	}
	os.Remove(planted)
	// the same case run on another machine (the first run, its node renamed): its own series
	other := onAnotherNode(t, filepath.Join(dir, ".opx-run", first), filepath.Join(dir, "laptop"), "laptop-7")
	db := filepath.Join(dir, "two.db")
	for _, r := range []string{run, other} {
		if o := in("history", "add", "--db", db, r); o.Code != 0 {
			t.Fatalf("add %s: %s", r, o.Stderr)
		}
	}
	o := in("history", "check", "--db", db, "--all")
	if !strings.Contains(o.Stdout, "12 series (12 points) checked") || !strings.Contains(o.Stdout, "local@laptop-7") {
		t.Errorf("two machines: %s", o.Stdout)
	}
}

// PostgreSQL never hangs a command: a session holding the writers' lock makes add fail
// within --db-timeout naming it (and check, which takes no lock, is not held up); a
// server that answers the connection and then stalls fails within the bound naming its
// host and port; a password given in the URL's parameters is never printed.
func TestPostgresBounded(t *testing.T) {
	dsn := testenv.Postgres(t)
	run := realRun(t)
	if o := opx("history", "add", "--db", dsn, run); o.Code != 0 {
		t.Fatalf("add: %s", o.Stderr)
	}
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("application_name", "psql-holding-the-lock")
	u.RawQuery = q.Encode()
	holder, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SELECT pg_advisory_lock(7243002), pg_advisory_lock(7243001)"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	o := opx("history", "add", "--db", dsn, "--db-timeout", "2s", "--at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), run)
	if o.Code != 1 || !strings.Contains(o.Stderr, "held by pid") || !strings.Contains(o.Stderr, "psql-holding-the-lock") || time.Since(start) > 15*time.Second {
		t.Errorf("add while a session holds the lock: exit %d after %s: %q", o.Code, time.Since(start), o.Stderr)
	}
	start = time.Now()
	if o := opx("history", "check", "--db", dsn, "--db-timeout", "2s"); o.Code != 0 || time.Since(start) > 15*time.Second {
		t.Errorf("check while a session holds the locks: exit %d after %s: %s", o.Code, time.Since(start), o.Stderr)
	}
	conn.Close()

	// a server that answers, then stalls once check reads the runs
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go stallAfter(c, u.Host, "FROM runs")
		}
	}()
	stalled := *u
	stalled.Host = ln.Addr().String()
	start = time.Now()
	o = opx("history", "check", "--db", stalled.String(), "--db-timeout", "4s")
	if o.Code != 1 || !strings.Contains(o.Stderr, ln.Addr().String()) || !strings.Contains(o.Stderr, "the server sent nothing for 4s (--db-timeout)") ||
		time.Since(start) > 8*time.Second { // 4 s and a slack for a loaded machine (it was 9 s: 5 s more than the bound)
		t.Errorf("a server that stalls: exit %d after %s: %q", o.Code, time.Since(start), o.Stderr)
	}
	// --db-timeout bounds the command's wait wherever the server stops: opening the store,
	// reading the points, adding a run
	for _, c := range []struct {
		marker string
		args   []string
	}{{"opx_history", []string{"history", "check"}}, {"FROM points", []string{"history", "check"}},
		{"FROM runs", []string{"history", "add", run, "--at", time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)}}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c2, err := ln.Accept()
				if err != nil {
					return
				}
				go stallAfter(c2, u.Host, c.marker)
			}
		}()
		at := *u
		at.Host = ln.Addr().String()
		start := time.Now()
		o := opx(append(c.args, "--db", at.String(), "--db-timeout", "4s")...)
		if o.Code != 1 || time.Since(start) > 8*time.Second || strings.Contains(o.Stderr, "not an opx history store") {
			t.Errorf("%v, the server stalling at %q: exit %d after %s: %q", c.args[:2], c.marker, o.Code, time.Since(start).Round(time.Millisecond), o.Stderr)
		}
		ln.Close()
	}
	o = opx("history", "check", "--db", "postgres://opx@127.0.0.1:1/opx?sslmode=disable&password=hunter2&sslpassword=swordfish")
	if o.Code != 1 || strings.Contains(o.Stderr, "hunter2") || strings.Contains(o.Stderr, "swordfish") {
		t.Errorf("a password in the URL's parameters: exit %d %q", o.Code, o.Stderr)
	}
}

// stallAfter forwards c to the server at addr until the client sends a statement holding
// marker, then forwards nothing more (a server that stops answering).
func stallAfter(c net.Conn, addr, marker string) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	stall := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if strings.Contains(string(buf[:n]), marker) {
				close(stall)
				return
			}
			s.Write(buf[:n])
		}
	}()
	go io.Copy(c, s)
	<-stall
	time.Sleep(time.Minute)
}

// Rows of cases the manifest never requested are counted as extra, never made series:
// history add records what summarize judges.
func TestExtraRowsAreNotSeries(t *testing.T) {
	run := realRun(t)
	editRows(t, run, func(rows []any) []any {
		for i := range 6 { // six ok rows of shapes nobody asked for
			row := map[string]any{}
			b, _ := json.Marshal(rows[0])
			json.Unmarshal(b, &row)
			row["op"].(map[string]any)["args"].(map[string]any)["m"] = 7000 + i
			rows = append(rows, row)
		}
		return rows
	})
	o := opx("history", "add", "--db", filepath.Join(t.TempDir(), "h.db"), run)
	if o.Code != 0 || !strings.Contains(o.Stderr, "6 cases (4 measured) recorded in") || !strings.Contains(o.Stderr, "; 6 extra row(s) of no requested case not recorded") {
		t.Errorf("add of a run with extra rows: exit %d %q", o.Code, o.Stderr)
	}
}

// Nothing is trusted in another user's directory: root's opx run does not write into an
// --out another user made (or one open to other users), and a --db that is another user's
// store, or a link, is refused naming why — nothing written, no link followed.
func TestAnotherUsersOutAndStore(t *testing.T) {
	_, otherUID := testenv.OtherUser(t)
	shared := testenv.SharedDir(t)
	theirs := filepath.Join(shared, "theirs")
	os.Mkdir(theirs, 0o777)
	os.Chown(theirs, otherUID, -1)
	os.Chmod(theirs, 0o777)
	if o := opx("run", "--out", theirs); o.Code == 0 || !strings.Contains(o.Stderr, "belongs to another user (owner uid "+strconv.Itoa(otherUID)) {
		t.Errorf("run --out of another user's directory: exit %d %q", o.Code, o.Stderr)
	}
	open := filepath.Join(shared, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if o := opx("run", "--out", open); o.Code == 0 || !strings.Contains(o.Stderr, "is writable by other users") {
		t.Errorf("run --out of a directory open to others: exit %d %q", o.Code, o.Stderr)
	}
	for _, d := range []string{theirs, open} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s: opx wrote %v", d, ents)
		}
	}
	run := realRun(t)
	store := filepath.Join(shared, "their.db")
	if o := opx("history", "add", "--db", store, run); o.Code != 0 {
		t.Fatalf("add: %s", o.Stderr)
	}
	os.Chown(store, otherUID, -1)
	if o := opx("history", "check", "--db", store); o.Code != 1 || !strings.Contains(o.Stderr, "belongs to another user (owner uid "+strconv.Itoa(otherUID)) {
		t.Errorf("another user's store: exit %d %q", o.Code, o.Stderr)
	}
	target := filepath.Join(shared, "made-by-root.db")
	link := filepath.Join(shared, "link.db")
	os.Symlink(target, link)
	if o := opx("history", "add", "--db", link, run); o.Code != 1 || !strings.Contains(o.Stderr, "is a symbolic link") {
		t.Errorf("a store path that is a dangling link: exit %d %q", o.Code, o.Stderr)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("the link's target was created")
	}
}

// A 20 MB message in one row makes neither a 20 MB page nor a 20 MB ledger: every reader
// keeps at most safe.MaxMessage of it, saying how much it left out.
func TestHugeMessageIsCapped(t *testing.T) {
	run := realRun(t)
	editRows(t, run, func(rows []any) []any {
		row := rows[0].(map[string]any)
		row["status"], row["message"] = "error", strings.Repeat("x", 20<<20)
		return rows
	})
	page := filepath.Join(t.TempDir(), "r.html")
	opx("report", "--out", page, run)
	cases := filepath.Join(t.TempDir(), "cases.json")
	opx("summarize", "--manifest", filepath.Join(run, "operatorx-manifest.json"), "--artifacts", filepath.Join(run, "shards"),
		"--out", filepath.Join(t.TempDir(), "s.json"), "--cases", cases)
	for _, p := range []string{page, cases} {
		st, err := os.Stat(p)
		if err != nil || st.Size() > 1<<20 {
			t.Errorf("%s: %v, %d bytes", p, err, st.Size())
		}
	}
	if b, _ := os.ReadFile(cases); !strings.Contains(string(b), "bytes more)") {
		t.Errorf("the ledger does not say the message was cut")
	}
}

// history add prints what a run names itself (its run id) escaped: an ESC in it never
// reaches the terminal raw.
func TestAddPrintsRunIDEscaped(t *testing.T) {
	run := realRun(t)
	files, _ := filepath.Glob(filepath.Join(run, "shards", "*", "execution.json"))
	files = append(files, filepath.Join(run, "operatorx-manifest.json"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		os.WriteFile(f, []byte(strings.ReplaceAll(string(b), `"run_id": "local"`, `"run_id": "local\u001b]0;pwned\u0007\u001b[2J"`)), 0o644)
	}
	o := opx("history", "add", "--db", filepath.Join(t.TempDir(), "h.db"), "--at", "2026-11-01T02:00:00Z", run)
	if strings.ContainsRune(o.Stderr, 0x1b) || !strings.Contains(o.Stderr, `local\x1b]0;pwned`) {
		t.Errorf("history add: exit %d %q", o.Code, o.Stderr)
	}
}

// realRun is a real run of this machine (opx run, the cpu backend) in a fresh directory.
func realRun(t *testing.T) string {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run")
	if o := opx("run", "--out", run); o.Code != 0 {
		t.Fatalf("opx run: %s", o.Stderr)
	}
	return run
}

// editRows rewrites the rows of a real run's one results file.
func editRows(t *testing.T, run string, edit func(rows []any) []any) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(run, "shards", "*", "results", "*", "*", "*.json"))
	if len(files) != 1 {
		t.Fatalf("results files: %v", files)
	}
	var doc map[string]any
	b, _ := os.ReadFile(files[0])
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["rows"] = edit(doc["rows"].([]any))
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Triage: a change's id is stable across checks; acknowledged still fails the gate,
// expected (or invalid) no longer does; every event is kept with who, note and link; a
// state, note or link that is not allowed is a usage error, an id check never found is
// refused — on SQLite and on PostgreSQL.
func TestTriage(t *testing.T) {
	for _, db := range []string{filepath.Join(t.TempDir(), "h.db"), testenv.Postgres(t)} {
		history.StepStore(t, db)
		js := filepath.Join(t.TempDir(), "c.json")
		check := func() (int, history.Change) {
			t.Helper()
			o := opx("history", "check", "--db", db, "--fail-on-regression", "5", "--json", js)
			var f struct{ Changes []history.Change }
			b, _ := os.ReadFile(js)
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatalf("check: exit %d %s: %v", o.Code, o.Stderr, err)
			}
			for _, c := range f.Changes {
				if c.Key == "s2" {
					return o.Code, c
				}
			}
			t.Fatalf("no change of s2: %s", b)
			return 0, history.Change{}
		}
		code, c := check()
		if code != 1 || c.Triage != "open" || !strings.HasPrefix(c.ID, "c") || len(c.ID) != 16 {
			t.Fatalf("before triage: exit %d, %+v", code, c)
		}
		id := c.ID
		for _, bad := range [][]string{{"--state", "bogus"}, {"--state", "expected", "--link", "javascript:alert(1)"}, {"--state", "expected", "--link", "ftp://x/y"}} {
			if o := opx(append([]string{"history", "triage", id, "--db", db}, bad...)...); o.Code != 2 {
				t.Errorf("triage %v: exit %d %q", bad, o.Code, o.Stderr)
			}
		}
		if o := opx("history", "triage", "c0000000000000f", "--state", "expected", "--db", db); o.Code != 1 || !strings.Contains(o.Stderr, "no change c0000000000000f") {
			t.Errorf("an unknown id: exit %d %q", o.Code, o.Stderr)
		}
		if o := opx("history", "triage", id, "--state", "acknowledged", "--db", db, "--link", "https://github.com/org/repo/issues/12"); o.Code != 0 || !strings.Contains(o.Stderr, "open → acknowledged") {
			t.Fatalf("acknowledge: exit %d %q", o.Code, o.Stderr)
		}
		// acknowledged: someone is on it, and the gate still fails
		if code, c = check(); code != 1 || c.ID != id || c.Triage != "acknowledged" {
			t.Errorf("acknowledged: exit %d %+v", code, c)
		}
		if o := opx("history", "triage", id, "--state", "expected", "--db", db, "--note", "the new driver's path"); o.Code != 0 {
			t.Fatalf("expected: exit %d %q", o.Code, o.Stderr)
		}
		code, c = check()
		if code != 0 || c.Triage != "expected" || len(c.TriageEvents) != 2 || c.TriageEvents[0].Link != "https://github.com/org/repo/issues/12" ||
			c.TriageEvents[1].Note != "the new driver's path" || c.TriageEvents[1].From != "acknowledged" || c.TriageEvents[1].Via != "cli" {
			t.Errorf("after expected: exit %d %+v", code, c)
		}
		// the JUnit report agrees: the expected change passes
		xml := filepath.Join(t.TempDir(), "c.xml")
		opx("history", "check", "--db", db, "--fail-on-regression", "5", "--junit", xml)
		if r := testenv.ValidJUnit(t, xml); r.Failures != 0 {
			t.Errorf("JUnit after expected: %d failures", r.Failures)
		}
	}
}

// opx serve as a user starts it: it says where it listens, answers /healthz, and SIGTERM
// drains and exits 0; a non-loopback address without tokens, a --listen that is not
// host:port and --public-read without tokens are usage errors, before the store is opened.
func TestServeCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	history.StepStore(t, db)
	for _, args := range [][]string{{"--listen", "0.0.0.0:0"}, {"--listen", "8080"}, {"--public-read"}} {
		if o := opx(append([]string{"serve", "--db", db}, args...)...); o.Code != 2 {
			t.Errorf("serve %v: exit %d %q", args, o.Code, o.Stderr)
		}
	}
	cmd := exec.Command(opxBin, "serve", "--db", db, "--listen", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make([]byte, 512)
	n, _ := stderr.Read(line)
	first := string(line[:n])
	i := strings.Index(first, "http://")
	if i < 0 {
		t.Fatalf("serve said %q", first)
	}
	base := strings.Fields(first[i:])[0]
	resp, err := http.Get(base + "healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "ok\nstore: ") {
		t.Errorf("/healthz: %d %q", resp.StatusCode, b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("opx serve after SIGTERM: %v (want exit 0)", err)
	}
}

// onAnotherNode copies a run to dst with its fingerprints' node renamed: the same cases
// measured on another machine (local@node, a series of its own).
func onAnotherNode(t *testing.T, run, dst, node string) string {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(run)); err != nil {
		t.Fatal(err)
	}
	fps, _ := filepath.Glob(filepath.Join(dst, "shards", "*", "fingerprint-*.json"))
	for _, fp := range fps {
		b, _ := os.ReadFile(fp)
		var v map[string]any
		json.Unmarshal(b, &v)
		host, _ := v["node"].(string)
		os.WriteFile(fp, []byte(strings.ReplaceAll(string(b), `"node": "`+host+`"`, `"node": "`+node+`"`)), 0o644)
	}
	return dst
}

// opx serve's signals: the first lets the requests in flight finish (a client stalled
// mid-request holds the drain), saying so in a server's words; a second ends it at once,
// exit 130, and speaks of requests, never of shards or allocations.
func TestServeSecondSignalEndsAtOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	run := filepath.Join(t.TempDir(), "run")
	if o := opx("run", "--out", run); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	if o := opx("history", "add", "--db", db, run); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	cmd := exec.Command(opxBin, "serve", "--db", db, "--listen", "127.0.0.1:0")
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var addr string
	for deadline := time.Now().Add(20 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`).FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n")) // a request begun, never finished
	time.Sleep(200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	first := "opx serve: interrupted by SIGINT (Ctrl-C): no new request is taken; the requests in flight finish"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), first) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), first) {
		t.Errorf("the first signal's words: %s", stderr.String())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("serve ended before the stalled request, or the second signal: %v\n%s", err, stderr.String())
	default:
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		t.Fatalf("a second signal did not end opx serve at once:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "opx serve: stopping now: the requests in flight are cut short") ||
		strings.Contains(stderr.String(), "shard") || strings.Contains(stderr.String(), "allocation") {
		t.Errorf("exit %d:\n%s", code, stderr.String())
	}
}

// Readers never write and never wait: check, report and serve open a store without
// migrating it (an older schema is refused naming opx history migrate, and left as it was;
// a store of an earlier revision is read as it is, its revision kept), and a reader is not
// held up by a writer holding SQLite's write lock; opx history migrate brings a store forward.
func TestReadersNeverWriteOrWait(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if o := opx("run", "--out", run); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	db := filepath.Join(dir, "h.db")
	if o := opx("history", "add", "--db", db, run); o.Code != 0 {
		t.Fatal(o.Stderr)
	}
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	meta := func() string {
		var schema, rev string
		raw.QueryRow("SELECT value FROM opx_history WHERE name = 'schema'").Scan(&schema)
		raw.QueryRow("SELECT value FROM opx_history WHERE name = 'revision'").Scan(&rev)
		return schema + "/" + rev
	}
	// a store of revision 0 (an older opx of this schema made it): read as it is
	if _, err := raw.Exec("ALTER TABLE contexts DROP COLUMN contended; ALTER TABLE contexts DROP COLUMN kind; DROP TABLE checks; DROP TABLE notices; DELETE FROM opx_history WHERE name = 'revision'"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check"}, {"check", "--fail-on-regression", "5"}, {"report", "--out", filepath.Join(dir, "p.html")}} {
		if o := opx(append(append([]string{"history"}, args...), "--db", db)...); o.Code != 0 {
			t.Errorf("history %v of a store of revision 0: exit %d %s", args, o.Code, o.Stderr)
		}
	}
	if m := meta(); m != "3/" {
		t.Errorf("a reader revised the store: schema/revision %s", m)
	}
	// a store of an older schema: refused by readers, naming the way forward, untouched
	if _, err := raw.Exec("UPDATE opx_history SET value = '2' WHERE name = 'schema'"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"history", "check"}, {"history", "report", "--out", filepath.Join(dir, "p2.html")}, {"serve", "--listen", "127.0.0.1:0"}} {
		o := opx(append(args, "--db", db)...)
		if o.Code != 1 || !strings.Contains(o.Stderr, "was written by an older opx (history schema 2; this opx reads 3): bring it forward with opx history migrate") {
			t.Errorf("%v of an older store: exit %d %s", args, o.Code, o.Stderr)
		}
	}
	if m := meta(); m != "2/" {
		t.Errorf("a refused reader changed the store: %s", m)
	}
	if _, err := raw.Exec("UPDATE opx_history SET value = '3' WHERE name = 'schema'"); err != nil { // as it was (schema 3's tables are there)
		t.Fatal(err)
	}
	if o := opx("history", "migrate", "--db", db); o.Code != 0 || !strings.Contains(o.Stderr, "history schema 3, revision 5 (was schema 3, revision 0)") {
		t.Errorf("migrate: exit %d %s", o.Code, o.Stderr)
	}
	if o := opx("history", "migrate", "--db", db); o.Code != 0 || !strings.Contains(o.Stderr, "already at history schema 3, revision 5: nothing to do") {
		t.Errorf("migrate again: exit %d %s", o.Code, o.Stderr)
	}
	// a writer holds the write lock (an add in progress): a reader goes on at once
	tx, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO opx_history (name, value) VALUES ('held', 'by a writer')"); err != nil {
		t.Fatal(err)
	}
	start := time.Now() // a reader that waited for the writer would wait its whole --db-timeout (20 s)
	o := opx("history", "check", "--db", db, "--db-timeout", "20s")
	if o.Code != 0 || time.Since(start) > 10*time.Second {
		t.Errorf("check beside a writer: exit %d after %s %s", o.Code, time.Since(start).Round(time.Millisecond), o.Stderr)
	}
	tx.Rollback()
}

// One answer per store: text PostgreSQL cannot hold (a NUL byte, invalid UTF-8) is kept
// escaped the same way on SQLite and PostgreSQL when a run brings it (the field named),
// and a lookup of such text is "no such series" / "no such change" on both, never 503.
func TestOneAnswerPerStore(t *testing.T) {
	run := realRun(t)
	fps, _ := filepath.Glob(filepath.Join(run, "shards", "*", "fingerprint-*.json"))
	for _, fp := range fps {
		b, _ := os.ReadFile(fp)
		b = regexp.MustCompile(`"node": "[^"]*"`).ReplaceAll(b, []byte(`"node": "vm\u0000x"`))
		os.WriteFile(fp, b, 0o644)
	}
	latin := filepath.Join(t.TempDir(), "r\xe9sum\xe9") // a directory named in Latin-1
	if err := exec.Command("cp", "-r", run, latin).Run(); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{filepath.Join(t.TempDir(), "h.db"), testenv.Postgres(t)} {
		// a run whose node name holds a NUL, in a directory named in Latin-1
		o := opx("history", "add", "--db", db, latin)
		if o.Code != 0 || !strings.Contains(o.Stderr, `kept escaped`) || !strings.Contains(o.Stderr, `node "vm\x00x"`) || !strings.Contains(o.Stderr, "run directory") {
			t.Errorf("%s: add of a run whose node name holds a NUL, in a Latin-1 directory: exit %d %s", db, o.Code, o.Stderr)
		}
		js := filepath.Join(t.TempDir(), "c.json")
		if o := opx("history", "check", "--db", db, "--all", "--json", js); o.Code != 0 {
			t.Errorf("%s: check: exit %d %s", db, o.Code, o.Stderr)
		}
		if b, _ := os.ReadFile(js); !strings.Contains(string(b), `local@vm\\x00x`) {
			t.Errorf("%s: the node is not kept escaped: %.300s", db, b)
		}
		s, err := history.OpenReader(t.Context(), db, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"a\x00b", "a\xffb"} {
			if _, err := s.Series(t.Context(), key, 10); !errors.Is(err, history.ErrNoSeries) {
				t.Errorf("%s: series %q: %v, want no such series", db, key, err)
			}
			if _, err := s.Triage(t.Context(), key, history.TriageExpected, "me", "cli", "", "", false); err == nil || !strings.Contains(err.Error(), "no change") {
				t.Errorf("%s: triage %q: %v, want no such change", db, key, err)
			}
			if _, err := s.Triage(t.Context(), "cabc", history.TriageExpected, "me", "cli", "a note "+key, "", true); err == nil || !strings.Contains(err.Error(), "without NUL bytes") {
				t.Errorf("%s: a note %q: %v, want refused alike", db, key, err)
			}
		}
		s.Close()
	}
}
