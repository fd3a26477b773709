package sol

import (
	"math"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

// Row judges a case by its family's published peaks and the formulas alone.
func Row(op string, args *pyjson.Object, worldSize int, runner string, latencyUS float64) (Work, Judgement, bool) {
	return Judged(Case{Op: op, Args: args, WorldSize: worldSize, Runner: runner, LatencyUS: latencyUS})
}

func args(t *testing.T, s string) *pyjson.Object {
	t.Helper()
	v, err := pyjson.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(*pyjson.Object)
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %g, want %g", what, got, want)
	}
}

// Golden cases computed by hand: a 4096x7168x2048 bf16 GEMM in 412 µs is 2·m·n·k =
// 120.26 GFLOP in 412 µs = 291.9 TFLOP/s: 29.5 % of an H100's 989, 13.0 % of a B200's
// 2,250. Its operands and output are (4096·2048 + 2048·7168 + 4096·7168)·2 B = 104.86 MB,
// 1,146.9 FLOP/B: above the H100's ridge (989 / 3.35 = 295 FLOP/B), so compute-bound, at
// 0.2545 TB/s, 7.6 % of 3.35.
func TestGEMMAgainstH100AndB200(t *testing.T) {
	a := args(t, `{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`)
	w, j, ok := Row("gemm", a, 1, "cluster:h100-dsxe", 412)
	if !ok {
		t.Fatal("no judgement")
	}
	near(t, "flops", w.FLOPs, 120_259_084_288, 1e-12)
	near(t, "bytes", w.Bytes, 104_857_600, 1e-12)
	near(t, "TFLOP/s", j.TFLOPS, 291.89, 1e-3)
	near(t, "% of H100 bf16", j.PctCompute, 29.51, 1e-3)
	near(t, "intensity", j.Intensity, 1146.88, 1e-4)
	near(t, "TB/s", j.TBPS, 0.25451, 1e-3)
	near(t, "% of H100 HBM", j.PctBandwidth, 7.597, 1e-3)
	if j.Bound != "compute" || j.Impossible || math.Abs(j.SOL-j.PctCompute) > 1e-9 {
		t.Errorf("judgement %+v", j)
	}
	_, j, _ = Row("gemm", a, 1, "cluster:b200-nscale", 412)
	near(t, "% of B200 bf16", j.PctCompute, 12.97, 1e-3)
	// a skinny GEMM is memory-bound: m=1 moves the whole 7168x2048 weight for 29 MFLOP
	skinny := args(t, `{"m": 1, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`)
	w, j, _ = Row("gemm", skinny, 1, "cluster:h200-dgxc", 10)
	if j.Bound != "memory" || w.FLOPs != 2*7168*2048 {
		t.Errorf("skinny: %+v %+v", w, j)
	}
	near(t, "skinny % of the roofline", j.SOL, j.PctBandwidth, 1e-9)
}

// A row above 100 % of a limit is impossible: the same GEMM in 10 µs would be 12,026
// TFLOP/s on an H100.
func TestImpossibleRow(t *testing.T) {
	a := args(t, `{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`)
	_, j, _ := Row("gemm", a, 1, "cluster:h100-dsxe", 10)
	if !j.Impossible || j.PctCompute < 1000 {
		t.Errorf("10 µs: %+v", j)
	}
}

// Block scales count in the bytes; fp8 runs at the fp8 peak; unknown families, dtypes and
// ops give no judgement.
func TestDtypesAndUnknowns(t *testing.T) {
	nv := args(t, `{"m": 16, "n": 16, "k": 16, "a": {"dtype": "nvfp4"}, "b": {"dtype": "nvfp4"}, "out": "bf16"}`)
	w, _ := WorkOf("gemm", nv, 1)
	near(t, "nvfp4 bytes", w.Bytes, 256*(0.5+1.0/16)*2+256*2, 1e-12)
	if w.Dtype != "fp4" {
		t.Errorf("nvfp4 class %q", w.Dtype)
	}
	f8 := args(t, `{"m": 4096, "n": 4096, "k": 4096, "a": {"dtype": "fp8"}, "b": {"dtype": "fp8"}, "out": "bf16"}`)
	_, j, _ := Row("gemm", f8, 1, "cluster:h200-dgxc", 100)
	near(t, "% of H200 fp8", j.PctCompute, 100*2*math.Pow(4096, 3)/100e-6/1e12/1979, 1e-9)
	if _, _, ok := Row("gemm", f8, 1, "local", 100); ok {
		t.Error("the local runner has no peak")
	}
	if _, _, ok := Row("gemm", args(t, `{"m": 4, "n": 4, "k": 4, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}`), 1, "cluster:h100-dsxe", 1); ok {
		t.Error("fp32 has no tensor peak in the table")
	}
	if _, ok := WorkOf("rmsnorm", args(t, `{"n": 4}`), 1); ok {
		t.Error("an op without a formula has no work")
	}
}

// MoE and attention from the catalog's args.
func TestMoEAndAttention(t *testing.T) {
	moe := args(t, `{"num_tokens": 1024, "hidden": 7168, "intermediate": 2048, "num_experts": 256, "top_k": 8, "dtype_act": "bf16", "dtype_weight": "fp8", "n_shared_experts": 1}`)
	w, ok := WorkOf("moe_forward", moe, 4)
	if !ok || w.Dtype != "fp8" {
		t.Fatalf("moe %+v", w)
	}
	near(t, "moe flops per GPU", w.FLOPs, 1024*9*6*7168*2048/4.0, 1e-12)
	near(t, "moe bytes per GPU", w.Bytes, (257*3*7168*2048*1.0+2*1024*7168*2)/4, 1e-12)
	att := args(t, `{"batch_size": 1, "seq_len_q": 4096, "seq_len_kv": 4096, "num_heads": 32, "num_heads_kv": 8, "head_dim": 128, "dtype_q": "bf16", "causal": true}`)
	w, ok = WorkOf("attention_mha", att, 1)
	if !ok {
		t.Fatal("attention")
	}
	near(t, "causal attention flops", w.FLOPs, 4*32*4096*4096*128/2.0, 1e-12)
	near(t, "attention bytes", w.Bytes, 2*(2*4096*32*128+2*4096*8*128.0), 1e-12)
}

// A site's figures replace the family's ones they name and keep the others.
func TestOverride(t *testing.T) {
	p := Override(Peaks["h100"], &Site{TFLOPS: map[string]float64{"bf16": 700}, HBM: 3, Source: "measured at 500 W"})
	if p.TFLOPS["bf16"] != 700 || p.TFLOPS["fp8"] != 1979 || p.HBM != 3 || p.Source != "measured at 500 W" || p.Certainty != "site" {
		t.Fatalf("override: %+v", p)
	}
	if Peaks["h100"].TFLOPS["bf16"] != 989 {
		t.Fatal("the override changed the table")
	}
	custom := Override(Peaks["lab"], &Site{TFLOPS: map[string]float64{"fp8": 100}, HBM: 1})
	if custom.TFLOPS["fp8"] != 100 || custom.HBM != 1 || custom.Source != "the platform config's operator.peaks" {
		t.Fatalf("a custom family: %+v", custom)
	}
}
