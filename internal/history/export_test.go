package history

import "testing"

// StepStore writes a store of 30 generated nightly runs of 4 series (node-a and node-b by
// turns, 1% noise): s1 1.11x faster from nightly-10, s2 1.3x slower at the newest run —
// for the command tests (package history_test).
func StepStore(t *testing.T, dsn string) {
	hist := genHistory(30, 4, 3)
	for i := 10; i < 30; i++ {
		hist[i].values["s1"] *= 0.9
	}
	hist[29].values["s2"] *= 1.3
	storeOf(t, dsn, hist).Close()
}
