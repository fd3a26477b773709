package export

import (
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
)

// An ok GEMM row on a known family gets its place against the limits; others get empty
// columns (the numbers are sol's, tested there).
func TestJudgedColumns(t *testing.T) {
	args, _ := pyjson.Parse([]byte(`{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`))
	r := results.Row{OpType: "gemm", Args: args.(*pyjson.Object), Runner: "cluster:h100-dsxe", WorldSize: 1, Status: "ok",
		Metrics: map[string]float64{"latency_us": 412}, MetricOrder: []string{"latency_us"}}
	got := strings.Join(judged(&r), ",")
	if got != "1.20259e+11,1.04858e+08,291.891,0.254509,29.5137,7.59728,1146.88,compute,29.5137,false" {
		t.Errorf("judged: %s", got)
	}
	if s := solOf(&r); s["bound"] != "compute" || s["impossible"] != false || s["pct_of_compute_peak"].(float64) < 29 {
		t.Errorf("sol object %v", s)
	}
	r.Runner = "local"
	if got := strings.Join(judged(&r), ","); got != ",,,,,,,,," {
		t.Errorf("local runner: %q", got)
	}
}
