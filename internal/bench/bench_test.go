package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/semianalysis/opx/internal/catalog"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestRowsOkUnsupportedError(t *testing.T) {
	dir := t.TempDir()
	tl := filepath.Join(dir, "tl")
	os.MkdirAll(tl, 0o755)
	os.WriteFile(filepath.Join(tl, "mix.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 16, "n": 24, "k": 8, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 16, "n": 16, "k": 16, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "sources": []},
	  {"type": "moe", "args": {"tokens": 4}, "sources": []},
	  {"type": "gemm", "args": {"m": -1, "n": 16, "k": 16, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []},
	  {"type": "gemm", "args": {"m": 8, "n": 8, "k": 8, "parallel": {"tp": 2}, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}}, "sources": []}]`), 0o644)
	res := filepath.Join(dir, "results")
	sum, err := Run(context.Background(), Options{Strict: true, TestlistDir: tl, ResultsDir: res, Testlists: []string{"mix"},
		Getenv: env(map[string]string{"OPERATORX_WARMUP_MIN_S": "0", "OPERATORX_CLUSTER": "local"}), Environ: []string{"OPERATORX_SHARD_ID=s1", "HOME=/x"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "1 ok, 2 unsupported, 1 error") {
		t.Fatalf("strict run: %v", err)
	}
	b, _ := os.ReadFile(sum.Path)
	var doc struct {
		Run  struct{ Env map[string]string }
		Rows []struct {
			Status  string
			Message string
			Metrics map[string]float64
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) != 4 || doc.Run.Env["OPERATORX_SHARD_ID"] != "s1" || doc.Run.Env["HOME"] != "" {
		t.Fatalf("rows %d env %v", len(doc.Rows), doc.Run.Env)
	}
	ok := doc.Rows[0]
	if ok.Status != "ok" || ok.Metrics["latency_us"] <= 0 || ok.Metrics["gflops"] <= 0 || ok.Metrics["iterations"] < 3 {
		t.Fatalf("ok row %+v", ok)
	}
	if doc.Rows[1].Status != "unsupported" || !strings.Contains(doc.Rows[1].Message, "bf16") {
		t.Fatalf("bf16 row %+v", doc.Rows[1])
	}
	if doc.Rows[2].Status != "unsupported" || doc.Rows[2].Message != "cpu/cpu has no implementation for moe" {
		t.Fatalf("moe row %+v", doc.Rows[2])
	}
	if doc.Rows[3].Status != "error" || len(doc.Rows[3].Metrics) != 0 {
		t.Fatalf("error row %+v", doc.Rows[3])
	}
}

func TestSplitMismatch(t *testing.T) {
	_, err := Run(context.Background(), Options{Testlists: []string{"cpu_smoke"},
		Getenv: env(map[string]string{"OPERATORX_PARALLEL": `{"tp": 2}`, "WORLD_SIZE": "1"})}, nil)
	if err == nil || err.Error() != `OPERATORX_PARALLEL={"tp": 2} needs 2 ranks, launched 1` {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Testlists: []string{"nope"}, Getenv: env(nil)}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "unknown testlist(s): [nope]; available: [") {
		t.Fatal(err)
	}
}

// BenchmarkHarnessVsDgemm compares the harness's timed step on 1024³ fp64 with gonum's
// Dgemm called directly (the harness overhead must stay under 5%).
func BenchmarkHarnessVsDgemm(b *testing.B) {
	const n = 1024
	a, bb := gen64(n, n, 1), gen64(n, n, 2)
	c := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
	b.Run("dgemm-direct", func(b *testing.B) {
		for b.Loop() {
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, bb, 0, c)
		}
	})
	b.Run("harness", func(b *testing.B) {
		for b.Loop() {
			Measure(func() { blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, bb, 0, c) }, 0, 1, 1)
		}
	})
}

// The cpu backend takes every testlist opx ships and every one of the reference catalog
// (issue 20): both operand schemas ({"a": {"dtype"}} and dtype_a), entries with a "name"
// and without "sources". fp32/fp64 GEMMs small enough are measured; everything else is an
// unsupported row with its reason — never an error row or a harness failure.
func TestEveryTestlistRuns(t *testing.T) {
	dirs := map[string]string{"embedded": ""}
	if _, err := os.Stat("../../../shared/reference/testlists"); err == nil {
		dirs["reference"] = "../../../shared/reference/testlists"
	}
	for where, dir := range dirs {
		for _, name := range catalog.NewTestlists(dir).Names() {
			t.Run(where+"/"+name, func(t *testing.T) {
				res := t.TempDir()
				sum, err := Run(context.Background(), Options{Strict: true, TestlistDir: dir, Testlists: []string{name}, ResultsDir: res,
					Getenv: env(map[string]string{"OPERATORX_WARMUP_MIN_S": "0"})}, nil)
				if err != nil || sum.Error != 0 {
					t.Fatalf("%+v %v", sum, err)
				}
				if sum.OK+sum.Unsupported == 0 {
					return // every shape of this list needs more than one rank
				}
				b, _ := os.ReadFile(sum.Path)
				var doc struct {
					Rows []struct{ Status, Message string }
				}
				json.Unmarshal(b, &doc)
				for i, r := range doc.Rows {
					if r.Status == "unsupported" && r.Message == "" {
						t.Errorf("row %d is unsupported without a reason", i)
					}
				}
			})
		}
	}
}
