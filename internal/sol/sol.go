// Package sol places a measured case against its hardware's limits: peak tables, the work of
// each op, %SOL and the roofline.
//
// It places a measured case against its hardware's limits ("speed of light"): the
// published dense tensor throughput per dtype and HBM bandwidth of each GPU family opx
// knows, the work a case does (FLOPs and bytes moved, from its op type and args), and for
// an ok row its achieved rates, the share of each limit, its arithmetic intensity and the
// bound that applies. A row above 100 % of a limit is impossible: a broken timer, inputs
// resident in cache, or a wrong peak.
package sol

import (
	"math"
	"strings"
)

// Peak is one family's published limits, per GPU: dense tensor TFLOP/s by compute dtype
// class (bf16 also stands for fp16) and HBM TB/s.
type Peak struct {
	Family, FormFactor string
	TFLOPS             map[string]float64 // "bf16", "fp8", "fp4"
	HBM                float64            // TB/s
	Certainty, Source  string
}

// Peaks are the figures of docs/sol.md (from the project's reference gpu-peaks.md): dense,
// as published; S = one secondary source quoting the vendor's datasheet, U = sources
// disagree or the figure is derived by division.
var Peaks = map[string]Peak{
	"h100":   {"h100", "SXM5, 700 W", map[string]float64{"bf16": 989, "fp8": 1979}, 3.35, "S", "NVIDIA H100 Tensor Core GPU datasheet (sparse 1,979 / 3,958 listed, half without sparsity)"},
	"h200":   {"h200", "SXM, 700 W", map[string]float64{"bf16": 989, "fp8": 1979}, 4.8, "S", "NVIDIA H200 datasheet (HPC, SC23)"},
	"b200":   {"b200", "HGX/DGX B200, ~1,000 W", map[string]float64{"bf16": 2250, "fp8": 4500, "fp4": 9000}, 8.0, "S", "DGX B200 datasheet divided by 8 GPUs (72 / 144 PF FP4 dense / sparse, 64 TB/s); another source gives 7.7 TB/s"},
	"b300":   {"b300", "HGX B300", map[string]float64{"bf16": 2250, "fp8": 4500, "fp4": 13125}, 8.0, "U", "secondary sources disagree on FP4 (13,125-14,000) and HBM (7.7-8.0 TB/s); the lower FP4 figure is used"},
	"gb200":  {"gb200", "NVL72, per GPU", map[string]float64{"bf16": 2500, "fp8": 5000, "fp4": 10000}, 8.0, "S", "DGX SuperPOD GB200 datasheet, rack sparse figures / 72 / 2; one source gives FP4 9,000 (U)"},
	"gb300":  {"gb300", "NVL72, per GPU", map[string]float64{"bf16": 2500, "fp8": 5000, "fp4": 15000}, 8.0, "S", "GB300 NVL72 page: 1,080 PF FP4 dense and 576 TB/s per rack, / 72"},
	"mi300x": {"mi300x", "OAM, 750 W", map[string]float64{"bf16": 1307.4, "fp8": 2614.9}, 5.3, "S", "AMD Instinct MI300X data sheet as quoted in code tables"},
	"mi325x": {"mi325x", "OAM, 1,000 W", map[string]float64{"bf16": 1307.4, "fp8": 2614.9}, 6.0, "S", "S for BF16 and HBM; FP8 assumed equal to MI300X (U)"},
	"mi355x": {"mi355x", "OAM, 1,400 W", map[string]float64{"bf16": 2516.6, "fp8": 5033.2, "fp4": 10066.4}, 8.0, "S", "code tables (FP4 as MXFP4); one outlet quotes 20.1 PF FP4 under another convention (unresolved)"},
}

// Family is a runner label's hardware family, as the platform table names it
// ("cluster:h200-dgxc" is h200).
func Family(runner string) string {
	f, _, _ := strings.Cut(strings.TrimPrefix(runner, "cluster:"), "-")
	return f
}

// Work is what a case does: FLOPs and bytes moved per GPU, and the dtype class its compute
// runs in ("bf16", "fp8", "fp4", or "" when no tensor peak applies).
type Work struct {
	FLOPs, Bytes float64
	Dtype        string
	Source       string  // "formula" or "harness" (its own flops/bytes metrics)
	FormulaDiff  float64 // with harness FLOPs: how far the formula's are from them, %
}

// bytesPer is each element's size in bytes, block scales included: nvfp4 carries one
// FP8 scale per 16 values, mxfp4 and mxfp8 one E8M0 scale per 32.
var bytesPer = map[string]float64{
	"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2,
	"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "mxfp8": 1 + 1.0/32,
	"fp4": 0.5, "nvfp4": 0.5 + 1.0/16, "mxfp4": 0.5 + 1.0/32,
}

// class is the tensor peak a dtype's compute runs at.
func class(dtype string) string {
	switch {
	case dtype == "bf16" || dtype == "fp16":
		return "bf16"
	case strings.Contains(dtype, "fp8"):
		return "fp8"
	case strings.Contains(dtype, "fp4"):
		return "fp4"
	}
	return ""
}

// Args is what the formulas read of a case's args: numbers, text and flags by key, and
// the "dtype" of a member that is an object ({"a": {"dtype": "bf16"}}). The rows' args
// (the ordered JSON object the testlist gave) provide it.
type Args interface {
	Number(key string) (float64, bool)
	String(key string) (string, bool)
	Bool(key string) (bool, bool)
	StringIn(key, sub string) (string, bool)
}

// WorkOf is a case's work from its op type and args, when they determine it: gemm,
// moe_forward and attention_mha (docs/sol.md has the formulas).
func WorkOf(op string, args Args, worldSize int) (Work, bool) {
	num := func(k string) float64 { f, _ := args.Number(k); return f }
	dtype := func(k string) string {
		if s, ok := args.StringIn(k, "dtype"); ok {
			return s
		}
		s, _ := args.String(k)
		return s
	}
	switch op {
	case "gemm":
		m, n, k := num("m"), num("n"), num("k")
		a, b, out := dtype("a"), dtype("b"), dtype("out")
		sa, okA := bytesPer[a]
		sb, okB := bytesPer[b]
		so, okO := bytesPer[out]
		if m <= 0 || n <= 0 || k <= 0 || !okA || !okB || !okO {
			return Work{}, false
		}
		return Work{FLOPs: 2 * m * n * k, Bytes: m*k*sa + k*n*sb + m*n*so, Dtype: class(a)}, true
	case "moe_forward":
		return moeWork(num, func(k string) string { s, _ := args.String(k); return s }, worldSize)
	case "attention_mha":
		b, sq, skv := num("batch_size"), num("seq_len_q"), num("seq_len_kv")
		h, hkv, d := num("num_heads"), num("num_heads_kv"), num("head_dim")
		sz, ok := bytesPer[dtype("dtype_q")]
		if b <= 0 || sq <= 0 || skv <= 0 || h <= 0 || hkv <= 0 || d <= 0 || !ok {
			return Work{}, false
		}
		flops := 4 * b * h * sq * skv * d // QKᵀ and PV
		if c, _ := args.Bool("causal"); c {
			flops /= 2
		}
		bytes := sz * (2*b*sq*h*d + 2*b*skv*hkv*d) // Q and O; K and V
		return Work{FLOPs: flops, Bytes: bytes, Dtype: class(dtype("dtype_q"))}, true
	}
	return Work{}, false
}

// moeWork: every token runs top_k routed experts and the shared ones, each a gate, an up
// and a down projection of hidden x intermediate; the work is spread evenly over the world.
// Bytes: every expert's weights once, and the tokens' activations in and out.
func moeWork(num func(string) float64, str func(string) string, worldSize int) (Work, bool) {
	t, hid, inter := num("num_tokens"), num("hidden"), num("intermediate")
	e, topk, shared := num("num_experts"), num("top_k"), num("n_shared_experts")
	sw, okW := bytesPer[str("dtype_weight")]
	sa, okA := bytesPer[str("dtype_act")]
	if t <= 0 || hid <= 0 || inter <= 0 || e <= 0 || topk <= 0 || !okW || !okA {
		return Work{}, false
	}
	ws := math.Max(1, float64(worldSize))
	flops := t * (topk + shared) * 6 * hid * inter / ws
	bytes := ((e+shared)*3*hid*inter*sw + 2*t*hid*sa) / ws
	return Work{FLOPs: flops, Bytes: bytes, Dtype: class(str("dtype_weight"))}, true
}

// Judgement is an ok row against its limits.
type Judgement struct {
	TFLOPS, TBPS             float64 // achieved
	PctCompute, PctBandwidth float64 // of the peaks (0 when the peak is unknown)
	Intensity                float64 // FLOP per byte
	Bound                    string  // "compute" or "memory": the limit the roofline puts first
	SOL                      float64 // % of the roofline at this intensity
	Impossible               bool    // above 100 % of a limit
}

// Judge places a measured latency (µs) of work on the family's limits; ok is false when
// the family or the dtype's peak is unknown.
func Judge(w Work, latencyUS float64, p Peak) (Judgement, bool) {
	peak := p.TFLOPS[w.Dtype]
	if latencyUS <= 0 || peak <= 0 || p.HBM <= 0 || w.Bytes <= 0 {
		return Judgement{}, false
	}
	s := latencyUS / 1e6
	j := Judgement{TFLOPS: w.FLOPs / s / 1e12, TBPS: w.Bytes / s / 1e12, Intensity: w.FLOPs / w.Bytes}
	j.PctCompute, j.PctBandwidth = 100*j.TFLOPS/peak, 100*j.TBPS/p.HBM
	ceiling := math.Min(peak, j.Intensity*p.HBM) // TFLOP/s the roofline allows here
	j.Bound = "compute"
	if j.Intensity*p.HBM < peak {
		j.Bound = "memory"
	}
	j.SOL = 100 * j.TFLOPS / ceiling
	j.Impossible = j.PctCompute > 100 || j.PctBandwidth > 100
	return j, true
}

// Site is a platform entry's operator.peaks as platform.SitePeaks reads and checks it:
// the figures a site declares for its GPUs, which run at other clocks or power limits or
// are a custom runner's family, and where they come from.
type Site struct {
	TFLOPS map[string]float64 // by dtype class (bf16, fp8, fp4): only those it declares
	HBM    float64            // TB/s; 0 when it does not declare it
	Source string             // "" when it does not say
}

// Override is p with the figures the site declares; the others stay the family's.
func Override(p Peak, s *Site) Peak {
	out := Peak{Family: p.Family, FormFactor: p.FormFactor, TFLOPS: map[string]float64{}, HBM: p.HBM,
		Certainty: "site", Source: "the platform config's operator.peaks"}
	for k, v := range p.TFLOPS {
		out.TFLOPS[k] = v
	}
	for k, v := range s.TFLOPS {
		out.TFLOPS[k] = v
	}
	if s.HBM > 0 {
		out.HBM = s.HBM
	}
	if s.Source != "" {
		out.Source = s.Source
	}
	return out
}

// Case is what judging one ok row takes.
type Case struct {
	Op        string
	Args      Args
	WorldSize int
	Runner    string
	LatencyUS float64
	Peak      *Peak   // the site's, when its platform entry declares one; else the family's
	FLOPs     float64 // the harness's own "flops" metric, when it reports one: it wins
	Bytes     float64 // and its "bytes"
}

// Judged is a case's work — the harness's figures where it reports them, else the
// formulas' (Work.Source says which, and Work.FormulaDiff how far the formulas are from
// the harness's FLOPs) — and where its latency puts it (ok false when unknown).
func Judged(c Case) (Work, Judgement, bool) {
	w, formula := WorkOf(c.Op, c.Args, c.WorldSize)
	w.Source = "formula"
	if c.FLOPs > 0 || c.Bytes > 0 {
		h := w
		h.Source = "harness"
		if c.FLOPs > 0 {
			h.FLOPs = c.FLOPs
			if formula && w.FLOPs > 0 {
				h.FormulaDiff = 100 * (w.FLOPs - c.FLOPs) / c.FLOPs
			}
		}
		if c.Bytes > 0 {
			h.Bytes = c.Bytes
		}
		w, formula = h, h.FLOPs > 0 && h.Bytes > 0 && h.Dtype != ""
	}
	if !formula {
		return w, Judgement{}, false
	}
	p, ok := Peaks[Family(c.Runner)]
	if c.Peak != nil {
		p, ok = *c.Peak, true
	}
	if !ok {
		return w, Judgement{}, false
	}
	j, ok := Judge(w, c.LatencyUS, p)
	return w, j, ok
}
