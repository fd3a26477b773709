package compare

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// appendCase writes what json.Marshal writes of a Case, byte for byte, and fails where it
// fails (a value that is not finite): over edge cases of every field, and 20,000 cases
// drawn from them.
func TestAppendCaseIsMarshal(t *testing.T) {
	strs := []string{"", "t", "gemm", "m=128 n=4096 k=4096 a=bf16 out=bf16", `t | gemm | {"a": {"dtype": "bf16"}, "m": 1} | vllm | ws=1 | h200`,
		"<script>&amp;</script>", "tab\there\nnew\rret\bbs\fff", "\x00\x01\x1f\x7f", `back\slash "quoted"`, "é ü 日本 😀",
		"\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate", "1.53x faster", "change below 2 %"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 13.5, 512.25, 1.0 / 3, 1e-6, 9.99999e-7, 1e-7, 1e20, 1e21, 1e21 - 65536,
		-1e21, 1.7976931348623157e308, 5e-324, 123456789012345678, 0.000123, 2.5e-10, 25131.833535048496,
		math.NaN(), math.Inf(1), math.Inf(-1)}
	r := rand.New(rand.NewPCG(3, 9))
	str := func() string { return strs[r.IntN(len(strs))] }
	num := func(finite bool) float64 {
		for {
			// mostly drawn from the edge cases, else any float64 bit pattern
			f := floats[r.IntN(len(floats))]
			if r.IntN(4) == 0 {
				f = math.Float64frombits(r.Uint64())
			}
			if !finite || !(math.IsNaN(f) || math.IsInf(f, 0)) {
				return f
			}
		}
	}
	metric := func(finite bool) Metric {
		m := Metric{Name: str(), Direction: str(), Base: num(finite), New: num(finite), Ratio: num(finite), Speedup: num(finite),
			Change: str(), Class: str(), Noise: str()}
		if r.IntN(2) == 0 {
			m.BaseLo, m.BaseHi, m.NewLo, m.NewHi = num(finite), num(finite), num(finite), num(finite)
		}
		return m
	}
	var cases []Case
	for _, s := range strs { // every string in every string field
		cases = append(cases, Case{Key: s, Testlist: s, OpType: s, Args: s, Backend: s, Cluster: s, BaseStatus: s, NewStatus: s, NewMessage: s, Class: s})
	}
	for _, f := range floats { // every float in every float field
		m := Metric{Base: f, New: f, Ratio: f, Speedup: f, BaseLo: f, BaseHi: f, NewLo: f, NewHi: f}
		cases = append(cases, Case{Primary: &m, Metrics: []Metric{m, m}, PctOfRoofline: &Roofline{f, f}})
	}
	cases = append(cases, Case{Metrics: []Metric{}}, Case{PctOfRoofline: &Roofline{}}, Case{WorldSize: -3},
		Case{Contended: []string{"base"}}, Case{Contended: []string{"base", "new"}}, Case{Contended: []string{}}, Case{Contended: []string{strs[6]}})
	for range 20000 {
		finite := r.IntN(10) > 0
		c := Case{Key: str(), Testlist: str(), OpType: str(), Args: str(), Backend: str(), Cluster: str(), WorldSize: r.IntN(9), Class: str()}
		if r.IntN(2) == 0 {
			c.BaseStatus, c.NewStatus, c.NewMessage = str(), str(), str()
		}
		if r.IntN(4) == 0 {
			c.Contended = []string{str(), str()}[:1+r.IntN(2)]
		}
		if r.IntN(3) > 0 {
			m := metric(finite)
			c.Primary = &m
		}
		for range r.IntN(4) {
			c.Metrics = append(c.Metrics, metric(finite))
		}
		if r.IntN(2) == 0 {
			c.PctOfRoofline = &Roofline{num(finite) * float64(r.IntN(2)), num(finite) * float64(r.IntN(2))}
		}
		cases = append(cases, c)
	}
	errs := 0
	for i := range cases {
		c := &cases[i]
		want, wantErr := json.Marshal(c)
		got, err := appendCase([]byte("x"), c)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("case %d: appendCase says %v, json.Marshal %v", i, err, wantErr)
		}
		if err != nil {
			errs++
			continue
		}
		if string(got) != "x"+string(want) {
			t.Fatalf("case %d:\n appendCase %s\n Marshal    %s", i, got[1:], want)
		}
	}
	if errs == 0 || errs == len(cases) {
		t.Fatalf("the draw did not reach both outcomes: %d of %d failed", errs, len(cases))
	}
}

// FuzzAppendCase holds appendCase to json.Marshal for any string and any floats.
func FuzzAppendCase(f *testing.F) {
	f.Add("t | gemm | {\"m\": 1} | vllm", 13.5, 1e-7)
	f.Add("<&>\u2028\xff\x00", math.Inf(1), math.Copysign(0, -1))
	f.Fuzz(func(t *testing.T, s string, x, y float64) {
		m := Metric{Name: s, Direction: s, Base: x, New: y, Ratio: x, Speedup: y, Change: s, Class: s, Noise: s, BaseLo: y, NewHi: x}
		c := Case{Key: s, Testlist: s, OpType: s, Args: s, Backend: s, Cluster: s, NewMessage: s, Class: s, Primary: &m,
			Metrics: []Metric{m}, PctOfRoofline: &Roofline{x, y}}
		want, wantErr := json.Marshal(&c)
		got, err := appendCase(nil, &c)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || (err == nil && string(got) != string(want)) {
			t.Fatalf("appendCase %s (%v)\nMarshal    %s (%v)", got, err, want, wantErr)
		}
	})
}
