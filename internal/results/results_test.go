package results

import (
	"testing"
)

func TestSpread(t *testing.T) {
	r := Row{Metrics: map[string]float64{"latency_us": 10, "latency_min_us": 9, "latency_max_us": 14, "tflops": 100},
		Samples: map[string][]float64{}, MetricOrder: []string{"latency_us", "latency_min_us", "latency_max_us", "tflops"}}
	if lo, hi, how, ok := r.Spread("latency_us"); !ok || lo != 9 || hi != 14 || how != "min–max" {
		t.Errorf("min/max spread %v %v %q %v", lo, hi, how, ok)
	}
	// throughput computed from the latency takes its spread, inverted
	if lo, hi, how, ok := r.Spread("tflops"); !ok || lo < 71.42 || lo > 71.43 || hi < 111.1 || hi > 111.12 || how != "min–max of latency_us" {
		t.Errorf("derived spread %v %v %q %v", lo, hi, how, ok)
	}
	r.Samples["latency_us_samples"] = []float64{8, 9, 10, 11, 12, 100}
	if lo, hi, how, ok := r.Spread("latency_us"); !ok || lo != 9.25 || hi != 11.75 || how != "IQR of 6 samples" {
		t.Errorf("sample IQR %v %v %q %v", lo, hi, how, ok)
	}
	// a recorded spread that cannot be one is ignored, saying why: not containing its
	// value, inverted, below zero
	for _, c := range []struct {
		metrics map[string]float64
		why     string
	}{
		{map[string]float64{"latency_us": 10, "latency_p25_us": 1, "latency_p75_us": 2}, "ignored: its IQR [1, 2] does not contain the value 10"},
		{map[string]float64{"latency_us": 10, "latency_min_us": 12, "latency_max_us": 9}, "ignored: its min–max [12, 9] is inverted"},
		{map[string]float64{"latency_us": 10, "latency_p25_us": -5, "latency_p75_us": 11}, "ignored: its IQR [-5, 11] is below zero"},
	} {
		r := Row{Metrics: c.metrics}
		if lo, hi, how, ok := r.Spread("latency_us"); ok || how != c.why || lo != 0 || hi != 0 {
			t.Errorf("%v: %v %v %q %v, want %q", c.metrics, lo, hi, how, ok, c.why)
		}
	}
	if _, _, _, ok := (&Row{Metrics: map[string]float64{"gbps": 1}}).Spread("gbps"); ok {
		t.Error("a lone metric has no spread")
	}
	if p, _ := r.Primary(); p != "latency_us" {
		t.Errorf("primary %s", p)
	}
}

func TestFormatUnits(t *testing.T) {
	for _, c := range []struct {
		name string
		v    float64
		want string
	}{
		{"latency_us", 41.5, "41.50 µs"}, {"latency_us", 1234.5, "1.234 ms"}, {"latency_us", 0.5, "500.0 ns"},
		{"time_ms", 2500, "2.500 s"}, {"tflops", 829.1, "829.1 TFLOP/s"}, {"gflops", 12.38, "12.38 GFLOP/s"},
		{"bandwidth_gbps", 3350, "3350 GB/s"}, {"sol_pct", 87.5, "87.50 %"}, {"iterations", 688, "688.0"},
	} {
		if got := Format(c.name, c.v); got != c.want {
			t.Errorf("Format(%s, %v) = %q, want %q", c.name, c.v, got, c.want)
		}
	}
}
