package results

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Direction says which way a metric improves.
type Direction int

const (
	Neutral Direction = iota // not a figure of merit (iterations, threads, spread bounds)
	Lower                    // latency, time: lower is better
	Higher                   // throughput, bandwidth: higher is better
)

func (d Direction) String() string {
	switch d {
	case Lower:
		return "lower"
	case Higher:
		return "higher"
	}
	return "neutral"
}

var timeSuffixes = []string{"_ns", "_us", "_ms", "_s"}

// DirectionOf classifies a metric by its name. Spread bounds (latency_min_us,
// latency_max_us, *_p50 ...) and counters are neutral: they describe another metric.
func DirectionOf(name string) Direction { return factsOf(name).direction }

// facts are what a metric's name says: its direction and its display unit.
type facts struct {
	direction Direction
	unit      string
}

// named are the metric names worked out so far. A run names a handful of metrics on
// every one of its rows, and its rows are read on every core: each name is worked out
// once (up to mostNames names; any further one each time it is asked), and read back
// without a lock.
var (
	named      sync.Map // name → facts
	namedCount atomic.Int32
)

const mostNames = 4096

func factsOf(name string) facts {
	if f, ok := named.Load(name); ok {
		return f.(facts)
	}
	f := facts{directionOf(name), unitOf(name)}
	if namedCount.Load() < mostNames {
		if _, had := named.LoadOrStore(strings.Clone(name), f); !had {
			namedCount.Add(1)
		}
	}
	return f
}

func directionOf(name string) Direction {
	n := strings.ToLower(name)
	for _, w := range []string{"_min", "_max", "min_", "max_", "_p", "_std", "_stdev", "iterations", "threads", "count", "samples", "_pct_err"} {
		if strings.Contains(n, w) && !strings.HasSuffix(n, "_per_s") {
			if w == "_p" && !isPercentile(n) {
				continue
			}
			return Neutral
		}
	}
	for _, w := range []string{"flops", "gbps", "gb_s", "bandwidth", "throughput", "per_s", "tokens_s", "ops_s"} {
		if strings.Contains(n, w) {
			return Higher
		}
	}
	if strings.Contains(n, "latency") || strings.Contains(n, "time") || strings.Contains(n, "duration") {
		return Lower
	}
	for _, s := range timeSuffixes {
		if strings.HasSuffix(n, s) {
			return Lower
		}
	}
	return Neutral
}

// isPercentile matches a "_p<digits>" part (latency_p50_us).
func isPercentile(n string) bool {
	i := strings.Index(n, "_p")
	for i >= 0 {
		j := i + 2
		for j < len(n) && n[j] >= '0' && n[j] <= '9' {
			j++
		}
		if j > i+2 {
			return true
		}
		k := strings.Index(n[i+2:], "_p")
		if k < 0 {
			break
		}
		i += 2 + k
	}
	return false
}

// Primary is the row's headline metric: latency_us when present, else the first metric
// with a direction in the row's order.
func (r *Row) Primary() (string, bool) {
	if _, ok := r.Metrics["latency_us"]; ok {
		return "latency_us", true
	}
	for _, k := range r.MetricOrder {
		if DirectionOf(k) != Neutral {
			return k, true
		}
	}
	return "", false
}

// Spread is the interval a metric's value is known to within, from the row's own data:
// the interquartile range of its samples when it has them ("<name>_samples" or
// "samples_<unit>" lists), else the interval it recorded ("latency_lo_us" and
// "latency_hi_us", else the quartiles "latency_p25_us" and "latency_p75_us", for
// "latency_us"), else its min/max ("latency_min_us"/"latency_max_us" for
// "latency_us"). A throughput metric without its own spread takes the relative spread of
// the row's timed latency, inverted (it was computed from it). how names the source.
//
// A recorded spread that cannot be one — inverted, below zero, or not containing its
// value — is ignored: ok is false and how says why ("ignored: ..."), for a warning; the
// metric is then judged as one without a spread.
func (r *Row) Spread(name string) (lo, hi float64, how string, ok bool) {
	v, has := r.Metrics[name]
	if !has {
		return 0, 0, "", false
	}
	if xs := r.samplesFor(name); len(xs) >= 4 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return checked(v, quantile(s, 0.25), quantile(s, 0.75), fmt.Sprintf("IQR of %d samples", len(s)))
	}
	if len(r.Metrics) >= 3 { // a recorded pair is two metrics beside the value
		if lo, hi, ok := r.pair(name, "_lo", "_hi"); ok {
			return checked(v, lo, hi, "lo–hi")
		}
		if lo, hi, ok := r.pair(name, "_p25", "_p75"); ok {
			return checked(v, lo, hi, "IQR")
		}
		if lo, hi, ok := r.minMax(name); ok {
			return checked(v, lo, hi, "min–max")
		}
	}
	if DirectionOf(name) == Higher {
		if t, ok := r.Primary(); ok && t != name && DirectionOf(t) == Lower {
			if tlo, thi, how, ok := r.Spread(t); ok {
				tv := r.Metrics[t]
				if tv > 0 && tlo > 0 {
					return v * tv / thi, v * tv / tlo, how + " of " + t, true
				}
			}
		}
	}
	return 0, 0, "", false
}

// checked is a recorded spread when it can be one: 0 <= lo <= v <= hi.
func checked(v, lo, hi float64, how string) (float64, float64, string, bool) {
	why := ""
	switch {
	case lo > hi:
		why = "is inverted"
	case lo < 0:
		why = "is below zero"
	case v < lo || v > hi:
		why = "does not contain the value " + strconv.FormatFloat(v, 'g', 6, 64)
	}
	if why != "" {
		return 0, 0, fmt.Sprintf("ignored: its %s [%s, %s] %s", how, strconv.FormatFloat(lo, 'g', 6, 64), strconv.FormatFloat(hi, 'g', 6, 64), why), false
	}
	return lo, hi, how, true
}

func (r *Row) samplesFor(name string) []float64 {
	if len(r.Samples) == 0 {
		return nil
	}
	if xs, ok := r.Samples[name+"_samples"]; ok {
		return xs
	}
	if xs, ok := r.Samples[name]; ok {
		return xs
	}
	for _, s := range timeSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok {
			if xs, ok := r.Samples[base+"_samples"+s]; ok {
				return xs
			}
			if xs, ok := r.Samples["samples"+s]; ok && base == "latency" {
				return xs
			}
		}
	}
	return nil
}

// metric is the metric named by parts joined, looked up without a string made of them
// (every row's spread is looked for under a few names).
func (r *Row) metric(parts ...string) (float64, bool) {
	var room [64]byte
	b := room[:0]
	for _, p := range parts {
		b = append(b, p...)
	}
	v, ok := r.Metrics[string(b)]
	return v, ok
}

// pair is an interval the harness recorded for a time: "latency_lo_us"/"latency_hi_us"
// (the cpu backend's range of its rounds' medians) or "latency_p25_us"/"latency_p75_us"
// (quartiles) for "latency_us".
func (r *Row) pair(name, loTag, hiTag string) (float64, float64, bool) {
	for _, s := range timeSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok {
			lo, ok1 := r.metric(base, loTag, s)
			hi, ok2 := r.metric(base, hiTag, s)
			if ok1 && ok2 {
				return lo, hi, true
			}
		}
	}
	return 0, 0, false
}

func (r *Row) minMax(name string) (float64, float64, bool) {
	try := func(lo1, lo2, lo3, hi1, hi2, hi3 string) (float64, float64, bool) {
		lo, ok1 := r.metric(lo1, lo2, lo3)
		hi, ok2 := r.metric(hi1, hi2, hi3)
		return lo, hi, ok1 && ok2
	}
	if lo, hi, ok := try(name, "_min", "", name, "_max", ""); ok {
		return lo, hi, true
	}
	if lo, hi, ok := try("min_", name, "", "max_", name, ""); ok {
		return lo, hi, true
	}
	for _, s := range timeSuffixes {
		if base, ok := strings.CutSuffix(name, s); ok {
			if lo, hi, ok := try(base, "_min", s, base, "_max", s); ok {
				return lo, hi, true
			}
		}
	}
	return 0, 0, false
}

// quantile of sorted s, linear interpolation between closest ranks.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	return s[i]*(1-f) + s[i+1]*f
}

// Unit is the display unit of a metric.
func Unit(name string) string { return factsOf(name).unit }

func unitOf(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "tflops"):
		return "TFLOP/s"
	case strings.Contains(n, "gflops"):
		return "GFLOP/s"
	case strings.Contains(n, "flops"):
		return "FLOP/s"
	case strings.Contains(n, "gbps") || strings.Contains(n, "gb_s"):
		return "GB/s"
	case strings.HasSuffix(n, "_pct") || strings.Contains(n, "pct_"):
		return "%"
	}
	for _, s := range timeSuffixes {
		if strings.HasSuffix(n, s) {
			return strings.TrimPrefix(s, "_")
		}
	}
	return ""
}

// Format writes a value with its unit; times are scaled to ns/µs/ms/s.
func Format(name string, v float64) string {
	u := Unit(name)
	switch u {
	case "ns", "us", "ms", "s":
		secs := v * map[string]float64{"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[u]
		return FormatSeconds(secs)
	case "":
		return sig(v)
	case "%":
		return sig(v) + " %"
	}
	return sig(v) + " " + u
}

// FormatSeconds scales a duration in seconds.
func FormatSeconds(s float64) string {
	a := math.Abs(s)
	switch {
	case a == 0:
		return "0 s"
	case a < 1e-6:
		return sig(s*1e9) + " ns"
	case a < 1e-3:
		return sig(s*1e6) + " µs"
	case a < 1:
		return sig(s*1e3) + " ms"
	}
	return sig(s) + " s"
}

// sig prints about four significant digits without exponent noise.
func sig(v float64) string {
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64) // 1e-4*1e6 is 100, not 99.99…
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1e6 || a < 1e-3:
		return fmt.Sprintf("%.3g", v)
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// LatencyUS is the row's headline time in µs, when its headline metric is a time.
func (r *Row) LatencyUS() (float64, bool) {
	name, ok := r.Primary()
	if !ok || DirectionOf(name) != Lower {
		return 0, false
	}
	return Micros(name, r.Metrics[name]), true
}

// Micros is a time metric's value in µs.
func Micros(name string, v float64) float64 {
	switch Unit(name) {
	case "ns":
		return v / 1e3
	case "ms":
		return v * 1e3
	case "s":
		return v * 1e6
	}
	return v
}
