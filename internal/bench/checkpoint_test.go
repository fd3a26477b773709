package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as the benchmark process the checkpoint test kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv("OPX_BENCH_CHILD"); dir != "" {
		_, err := Run(context.Background(), Options{Strict: true, TestlistDir: filepath.Join(dir, "tl"), ResultsDir: filepath.Join(dir, "results"),
			Testlists: []string{"many"}, Getenv: env(map[string]string{"OPERATORX_WARMUP_MIN_S": "0.05", "OPERATORX_CLUSTER": "local"})}, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The rank-0 checkpoint survives a SIGKILL mid-sweep: while the benchmark runs, every read
// of the results file is a whole document (it is replaced by rename, never rewritten in
// place), and after the kill the rows measured so far are there, in testlist order.
func TestCheckpointSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tl"), 0o755)
	const n = 40
	var shapes []string
	for i := 0; i < n; i++ {
		shapes = append(shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 192, "k": 192, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}`, 160+i))
	}
	os.WriteFile(filepath.Join(dir, "tl", "many.json"), []byte("["+strings.Join(shapes, ",\n")+"]"), 0o644)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OPX_BENCH_CHILD="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	resDir := filepath.Join(dir, "results")
	find := func() string {
		var path string
		filepath.WalkDir(resDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
				path = p
			}
			return nil
		})
		return path
	}
	type doc struct {
		Rows []struct {
			Status string
			Op     struct{ Args struct{ M int } }
		}
	}
	reads, seen := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for seen < 3 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no 3 checkpointed rows within 60 s (seen %d)", seen)
		}
		select {
		case err := <-waited:
			t.Fatalf("the benchmark ended (%v) before it could be killed mid-sweep; make the testlist longer", err)
		default:
		}
		p := find()
		if p == "" {
			time.Sleep(time.Millisecond)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue // between listing and reading
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil {
			cmd.Process.Kill()
			t.Fatalf("read %d of the checkpoint was not a whole document: %v (%d bytes)", reads, err, len(b))
		}
		reads++
		seen = len(d.Rows)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	b, err := os.ReadFile(find())
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("after SIGKILL the results file does not parse: %v", err)
	}
	if len(d.Rows) < 3 || len(d.Rows) >= n {
		t.Fatalf("%d rows after a kill mid-sweep, want at least 3 and fewer than %d", len(d.Rows), n)
	}
	for i, r := range d.Rows {
		if r.Status != "ok" || r.Op.Args.M != 160+i {
			t.Fatalf("row %d: %+v, want the testlist's op %d, ok", i, r, i)
		}
	}
	t.Logf("%d whole reads during the run; %d rows kept after SIGKILL", reads, len(d.Rows))
}
