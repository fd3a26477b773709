package history_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
		if o.Code != 0 || !strings.Contains(o.Stderr, "6 cases (4 measured) recorded") {
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
