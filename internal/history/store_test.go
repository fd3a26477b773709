package history

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/testenv"
)

// eachStore runs the test on a fresh SQLite file and on a fresh PostgreSQL database.
func eachStore(t *testing.T, test func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { test(t, filepath.Join(t.TempDir(), "h.db")) })
	t.Run("postgres", func(t *testing.T) { test(t, testenv.Postgres(t)) })
}

func TestOpenRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "notes.txt")
	os.WriteFile(junk, []byte("these are my notes, not a database\n"), 0o644)
	_, err := Open(t.Context(), junk, true, 0)
	if err == nil || !strings.Contains(err.Error(), "not an opx history store") {
		t.Fatalf("a text file: %v", err)
	}
	if b, _ := os.ReadFile(junk); string(b) != "these are my notes, not a database\n" {
		t.Fatalf("the file was changed: %q", b)
	}
	if _, err := Open(t.Context(), filepath.Join(dir, "none.db"), false, 0); err == nil || !strings.Contains(err.Error(), "no history store at") {
		t.Fatalf("a reader of a store that does not exist: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Fatal("a reader created the store")
	}
}

// A store of a newer schema is refused, naming both versions; a database that holds other
// tables is someone else's and is left as it was — on SQLite and PostgreSQL.
func TestNewerAndForeignStores(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		s, err := Open(t.Context(), dsn, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(s.q("UPDATE opx_history SET value = '99' WHERE name = 'schema'")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := Open(t.Context(), dsn, true, 0); err == nil || !strings.Contains(err.Error(), "newer opx (history schema 99; this opx knows up to "+strconv.Itoa(Schema)+")") {
			t.Errorf("a newer store: %v", err)
		}
	})
	eachStore(t, func(t *testing.T, dsn string) {
		s, err := Open(t.Context(), dsn, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		// someone else's database: drop ours, make theirs
		for _, q := range []string{"DROP TABLE points", "DROP TABLE series", "DROP TABLE contexts", "DROP TABLE cells", "DROP TABLE runs",
			"DROP TABLE confirmations", "DROP TABLE opx_history", "CREATE TABLE invoices (id INTEGER)"} {
			if _, err := s.db.Exec(q); err != nil {
				t.Fatal(q, err)
			}
		}
		s.Close()
		if _, err := Open(t.Context(), dsn, true, 0); err == nil || !strings.Contains(err.Error(), "holds other tables (left untouched)") {
			t.Errorf("a foreign database: %v", err)
		}
	})
}

// A confirmation's run id is one opx run accepts, whatever the suspect run's id: cut
// (with a digest of the whole) when "confirm-" would make it too long.
func TestConfirmRunID(t *testing.T) {
	long := strings.Repeat("r", 125)
	for _, id := range []string{"nightly-12", long, long + "x", "a b/../c"} {
		got := confirmRunID(id)
		if !files.SafeName(got) {
			t.Errorf("confirmRunID(%q) = %q: not a run id opx run accepts", id, got)
		}
	}
	if confirmRunID("nightly-12") != "confirm-nightly-12" || confirmRunID(long) == confirmRunID(long+"x") {
		t.Errorf("confirmRunID: %q, %q %q", confirmRunID("nightly-12"), confirmRunID(long), confirmRunID(long+"x"))
	}
}

// A store of schema 1 (before triage and run tallies) is migrated on open: the triage
// table is made, what it held is kept, and its runs, which have no tally, are counted from
// their points as a run added now is counted when it is added.
func TestMigrateToTriage(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		s := storeOf(t, dsn, genHistory(6, 2, 5))
		for _, q := range []string{"DROP TABLE triage", "DROP INDEX series_case", "ALTER TABLE runs DROP COLUMN tally", "ALTER TABLE contexts DROP COLUMN contended", "ALTER TABLE contexts DROP COLUMN kind", "DROP TABLE checks", "DROP TABLE notices", "DELETE FROM opx_history WHERE name = 'revision'", "UPDATE opx_history SET value = '1' WHERE name = 'schema'"} {
			if _, err := s.db.Exec(s.q(q)); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		s2, err := Open(t.Context(), dsn, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		var v string
		var runs int
		s2.db.QueryRow(s2.q("SELECT value FROM opx_history WHERE name = 'schema'")).Scan(&v)
		s2.db.QueryRow(s2.q("SELECT COUNT(*) FROM runs")).Scan(&runs)
		if v != strconv.Itoa(Schema) || runs != 6 {
			t.Errorf("after migration: schema %q, %d runs", v, runs)
		}
		if _, err := s2.Triage(t.Context(), "cabc", TriageExpected, "me", "cli", "", "", true); err != nil {
			t.Errorf("triage after migration: %v", err)
		}
		counted, err := s2.RunList(t.Context())
		if err != nil || len(counted) != 6 || counted[0].Tally.Measured != 2 || counted[0].Verdict != "success" || counted[0].Hours <= 0 || counted[0].Unit != "GPU" {
			t.Errorf("runs counted from their points: %v %+v", err, counted)
		}
		s3 := storeOf(t, t.TempDir()+"/fresh.db", genHistory(6, 2, 5))
		tallied, err := s3.RunList(t.Context())
		if err != nil || len(tallied) != 6 || tallied[0].Tally != counted[0].Tally || tallied[0].Hours != counted[0].Hours || tallied[0].Unit != counted[0].Unit {
			t.Errorf("tallied when added %+v, counted from points %+v", tallied[0], counted[0])
		}
	})
}

// A change is named by its id or a unique start of it (4 characters or more); a start
// several ids share names none of them, and says which.
func TestChangeIDPrefix(t *testing.T) {
	f := &Found{Changes: []Change{{ID: "c1234aaaa"}, {ID: "c1234bbbb"}, {ID: "c9990000"}}}
	for _, c := range []struct {
		in, full string
		ok       bool
		several  int
	}{
		{"c1234aaaa", "c1234aaaa", true, 0}, {"c999", "c9990000", true, 0}, {"c1234a", "c1234aaaa", true, 0},
		{"c123", "c123", false, 2}, {"c9", "c9", false, 0}, {"zzzz", "zzzz", false, 0},
	} {
		full, ok, several := f.ChangeID(c.in)
		if full != c.full || ok != c.ok || len(several) != c.several {
			t.Errorf("ChangeID(%q) = %q %v %v, want %q %v and %d ids", c.in, full, ok, several, c.full, c.ok, c.several)
		}
	}
}

// A copy reads its source as one snapshot that takes no write lock: a writer goes on
// meanwhile (a nightly add into the store being copied does not wait on the copy).
func TestCopySnapshotLetsWritersOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	s := storeOf(t, path, genHistory(6, 2, 5))
	q, done, err := s.snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var before int
	if err := q.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM triage").Scan(&before); err != nil {
		t.Fatal(err)
	}
	w, err := Open(t.Context(), path, false, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Triage(t.Context(), "cabc", TriageExpected, "me", "cli", "", "", true); err != nil {
		t.Fatalf("a writer beside the copy's snapshot: %v", err)
	}
	var during int
	q.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM triage").Scan(&during)
	if during != before {
		t.Errorf("the snapshot saw the writer's row: %d, then %d", before, during)
	}
}

// Revision 2 re-keys a series an older opx kept under cluster "local" by the machines that
// measured it: its points split between local@node-a and local@node-b, none lost, the old
// series gone, and a triage event follows its change to the id it has under the new key —
// on SQLite and PostgreSQL.
func TestRekeyLocalSeries(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		s := storeOf(t, dsn, genHistory(6, 2, 5))
		oldKey := results.CaseKey("t", "gemm", `{"m": 0}`, "vllm", 1, LocalRunner)
		var before int
		s.db.QueryRow(s.q("SELECT COUNT(*) FROM points p JOIN series s ON s.id = p.series WHERE s.key = 's0'")).Scan(&before)
		// as an opx of before local@HOST kept it, with a triage event of a change starting at
		// nightly-02 (measured on node-a)
		var origin string
		s.db.QueryRow(s.q("SELECT origin FROM runs WHERE run_id = 'nightly-02'")).Scan(&origin)
		var node string
		s.db.QueryRow(s.q(`SELECT c.node FROM points p JOIN contexts c ON c.id = p.ctx JOIN runs r ON r.id = p.run JOIN series s ON s.id = p.series
			WHERE r.run_id = 'nightly-02' AND s.key = 's0'`)).Scan(&node)
		for _, q := range []string{"UPDATE series SET cluster = 'local', key = ? WHERE key = 's0'", "UPDATE opx_history SET value = '1' WHERE name = 'revision'", "ALTER TABLE contexts DROP COLUMN kind", "DROP TABLE checks", "DROP TABLE notices"} {
			args := []any{oldKey}
			if !strings.Contains(q, "?") {
				args = nil
			}
			if _, err := s.db.Exec(s.q(q), args...); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Triage(t.Context(), ChangeID(oldKey, "latency_us", "nightly-02", origin), TriageAcknowledged, "me", "cli", "", "", true); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2, err := Open(t.Context(), dsn, false, 0) // a writer: revises the store
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		var left, a, b int
		s2.db.QueryRow(s2.q("SELECT COUNT(*) FROM series WHERE cluster = 'local'")).Scan(&left)
		for n, into := range map[string]*int{"node-a": &a, "node-b": &b} {
			s2.db.QueryRow(s2.q("SELECT COUNT(*) FROM points p JOIN series s ON s.id = p.series WHERE s.key = ?"),
				results.CaseKey("t", "gemm", `{"m": 0}`, "vllm", 1, LocalRunner+"@"+n)).Scan(into)
		}
		if left != 0 || a == 0 || b == 0 || a+b != before {
			t.Errorf("after revision 2: %d series left under local; %d points on local@node-a, %d on local@node-b, of %d", left, a, b, before)
		}
		newID := ChangeID(results.CaseKey("t", "gemm", `{"m": 0}`, "vllm", 1, LocalRunner+"@"+node), "latency_us", "nightly-02", origin)
		ev, err := s2.TriageOf(t.Context(), []string{newID})
		if err != nil || len(ev[newID]) != 1 || ev[newID][0].To != TriageAcknowledged {
			t.Errorf("the triage did not follow its change to %s: %v %+v", newID, err, ev)
		}
	})
}
