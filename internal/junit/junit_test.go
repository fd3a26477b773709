package junit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/junit"
	"github.com/semianalysis/opx/internal/testenv"
)

// A suite is counted from its cases, valid against the schema the reporters read, and
// outside text in it (a case name with an escape sequence, a message with markup) reads
// back as the report shows it: escaped, never raw.
func TestWriteIsValidAndCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.xml")
	s := junit.Suite{Name: "opx compare a → b", Cases: []junit.Case{
		{Classname: "h100/vllm/gemm", Name: "m=128 \x1b[31mred</x>", Failure: &junit.Problem{Message: "1.50x slower <b>&", Type: "regression", Text: "latency_us 10 → 15\nline two"}},
		{Classname: "h100/vllm/gemm", Name: "m=256", Skipped: &junit.Problem{Message: "only in base"}},
		{Classname: "h100/vllm/gemm", Name: "m=512", Out: "1.01x faster"},
		{Classname: "run", Name: "the comparison", Error: &junit.Problem{Message: "nothing measured"}},
	}}
	if err := junit.Write(path, "opx compare", s, time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	r := testenv.ValidJUnit(t, path)
	if r.Tests != 4 || r.Failures != 1 || r.Skipped != 1 || len(r.Suites) != 1 || len(r.Suites[0].Cases) != 4 {
		t.Fatalf("counts %+v", r)
	}
	c := r.Suites[0].Cases[0]
	if c.Name != `m=128 \x1b[31mred</x>` || c.Failure == nil || c.Failure.Message != "1.50x slower <b>&" || c.Failure.Text != "latency_us 10 → 15\nline two" {
		t.Errorf("case 0 read back %+v %+v", c, c.Failure)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "\x1b") || !strings.HasPrefix(string(b), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Errorf("raw escape, or no XML header:\n%s", b)
	}
	// never over what is not a regular file
	if err := junit.Write(t.TempDir(), "x", s, time.Time{}); err == nil {
		t.Error("wrote over a directory")
	}
}
