package history

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/semianalysis/opx/internal/verdict"
)

// The check add keeps (KeepCheck) is the check of the newest run as NewestCheck makes it,
// read back whole (KeptCheck) — changes, the ids their triage follows, what was not
// measured — only for the state it is of and only by the opx that kept it; a store
// opened to read keeps none. The same on SQLite and PostgreSQL.
func TestKeptCheckIsTheCheck(t *testing.T) {
	eachStore(t, func(t *testing.T, dsn string) {
		hist := genHistory(30, 6, 3)
		for i := 20; i < 30; i++ {
			hist[i].values["s1"] *= 1.10
		}
		hist[29].values["s2"] *= 1.3           // a suspect at the newest run
		hist[29].outcome["s3"] = verdict.Error // not measured at the run under test
		s := storeOf(t, dsn, hist[:29])
		addGen(t, s, 29, hist[29])
		ctx := t.Context()
		state, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := s.KeptCheck(ctx, state); err != nil || f != nil {
			t.Fatalf("a check kept before any was: %v, %v", f, err)
		}
		n, err := s.KeepCheck(ctx)
		if err != nil || n != 6 {
			t.Fatalf("KeepCheck: %d series, %v", n, err)
		}
		want, err := s.NewestCheck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.KeptCheck(ctx, state)
		if err != nil || got == nil {
			t.Fatalf("KeptCheck: %v, %v", got, err)
		}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if string(wj) != string(gj) {
			t.Errorf("the kept check differs from the check:\n%s\n%s", gj, wj)
		}
		if len(got.Changes) < 2 || len(got.Unmeasured) != 1 {
			t.Fatalf("the check holds %d changes and %d unmeasured, want s1's and s2's and s3", len(got.Changes), len(got.Unmeasured))
		}
		for i, c := range got.Changes {
			if w := want.Changes[i]; len(c.aliases) != len(w.aliases) || c.RunName() != w.RunName() {
				t.Errorf("change %s: aliases %v, run %q; the check's %v, %q", c.ID, c.aliases, c.RunName(), w.aliases, w.RunName())
			}
		}
		// triage recorded after it was kept is read again
		id := got.Changes[0].ID
		if _, err := s.Triage(ctx, id, TriageExpected, "alice", "cli", "a known step", "", true); err != nil {
			t.Fatal(err)
		}
		if err := s.Triaged(ctx, got.Changes); err != nil || got.Changes[0].Triage != TriageExpected {
			t.Errorf("triage of a kept change: %q, %v", got.Changes[0].Triage, err)
		}
		// kept by another opx: not read
		if _, err := s.db.ExecContext(ctx, s.q("UPDATE checks SET made_by = ?"), "opx 0.1 format 1"); err != nil {
			t.Fatal(err)
		}
		if f, err := s.KeptCheck(ctx, state); err != nil || f != nil {
			t.Errorf("a check another opx kept was read: %v", err)
		}
		// a later add: the kept check is of a state the store no longer has
		addGen(t, s, 30, hist[0])
		now, _ := s.State(ctx)
		if f, err := s.KeptCheck(ctx, now); err != nil || f != nil {
			t.Errorf("a check kept of the store before an add was read as of after it: %v", err)
		}
		r, err := OpenReader(ctx, dsn, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.KeepCheck(ctx); err == nil {
			t.Error("a store opened to read kept a check")
		}
	})
}

// A webhook whose first notify was made (its posts failing) is told later of the groups
// that were new then, though they are no longer new: only a webhook never notified takes
// the groups that stand as known.
func TestFirstNotifyIsRecordedWhateverItsPosts(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "h.db"), true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Generate(t.Context(), Generated{Runs: 8, Cases: 60, Clusters: []string{"h200_dgxc_8x"}, StepAt: 4, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	f, err := s.NewestCheck(t.Context())
	if err != nil || len(f.Alerts) == 0 {
		t.Fatalf("no alert group: %v", err)
	}
	news, known, err := s.Unannounced(t.Context(), f, "never")
	if err != nil || len(news) != 0 || len(known) != len(f.Alerts) {
		t.Errorf("a webhook never notified: %d new, %d known of %d, %v", len(news), len(known), len(f.Alerts), err)
	}
	if err := s.Announced(t.Context(), "failed", Alert{ID: FirstNotice}); err != nil {
		t.Fatal(err)
	}
	news, known, err = s.Unannounced(t.Context(), f, "failed")
	if err != nil || len(news) != len(f.Alerts) || len(known) != 0 {
		t.Errorf("a webhook whose first notify failed: %d new, %d known of %d, %v", len(news), len(known), len(f.Alerts), err)
	}
}
