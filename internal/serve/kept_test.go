package serve

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/history"
)

// After an add that kept its check (history add does), the dashboard shows that check the
// moment it sees the add, fresh, judging nothing itself; after an add that kept none (an
// older opx's), it judges the store itself, as before.
func TestDashboardTakesTheKeptCheck(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "h.db")
	w, err := history.Open(t.Context(), dsn, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	night := func(from time.Time, keep bool) {
		t.Helper()
		if err := w.Generate(t.Context(), history.Generated{Runs: 1, Cases: 30, Clusters: []string{"h200_dgxc_8x"}, Seed: uint64(from.Unix()), From: from}); err != nil {
			t.Fatal(err)
		}
		if keep {
			if _, err := w.KeepCheck(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Generate(t.Context(), history.Generated{Runs: 8, Cases: 30, Clusters: []string{"h200_dgxc_8x"}, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.KeepCheck(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, err := history.OpenReader(t.Context(), dsn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := newDash(r, dsn)
	d.warm()
	shows := func(when string, judging, adopted int64, newest time.Time) {
		t.Helper()
		f, _, stale, err := d.current(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		d.mu.Lock()
		j, a := d.judging, d.adopted
		d.mu.Unlock()
		if stale || f.Newest == nil || !f.Newest.At.Equal(newest) || j != judging || a != adopted {
			t.Errorf("%s: stale %t, newest %v (want %v), %d checks judged and %d taken, want %d and %d", when, stale, f.Newest, newest, j, a, judging, adopted)
		}
	}
	day := func(n int) time.Time { return time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC).AddDate(0, 0, n) }
	shows("opened after a kept add", 0, 1, day(7))
	night(day(8), true)
	shows("after a nightly add that kept its check", 0, 2, day(8))
	night(day(9), false)
	shows("after an add that kept none", 1, 2, day(9))
}
