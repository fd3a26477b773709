package shard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/shard"
)

// FuzzReadExecution: execution.json comes back in artifacts from compute hosts; any bytes
// give an execution or a one-line error naming the file, never a panic.
func FuzzReadExecution(f *testing.F) {
	f.Add([]byte(`{"cell": {"id": "a", "runner": "local"}, "source_sha": "s", "run_id": "1", "attempt": "1", "stage": "/tmp/x"}`))
	f.Add([]byte(`{"cell": [], "run_id": 1}`))
	f.Add([]byte(`[`))
	p := filepath.Join(f.TempDir(), "execution.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		os.WriteFile(p, data, 0o644)
		ex, err := shard.ReadExecution(p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q: want one line naming the file", err)
			}
			return
		}
		if ex.ShardID == "" && ex.Cell == nil {
			t.Fatal("an execution without a cell")
		}
	})
}
