package summary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

// treeNumber is a metric's number as the tree gives it: an integer a float holds, or a
// finite float.
func treeNumber(v pyjson.Value) (float64, bool) {
	switch x := v.(type) {
	case pyjson.Int:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return 0, false
}

// metricsDocs are metrics objects at the edges: every kind of value, numbers as Python
// reads them, lists of anything, repeated names.
var metricsDocs = []string{
	`{}`,
	`{"latency_us": 13.5, "tflops": 512.25}`,
	`{"a": 1, "b": -0, "c": -0.0, "d": 1e400, "e": -1e400, "f": NaN, "g": Infinity, "h": -Infinity, "i": 12345678901234567890123, "j": 9007199254740993}`,
	`{"a": 1E5, "b": 2.50, "c": 1e-7, "d": 100000000000000000000, "e": 1000000000000000000000000, "f": 0.1}`,
	`{"s": "a\"b\\c\u00e9", "t": "", "n": null, "y": true, "z": false}`,
	`{"latency_us_samples": [1, 2.5, NaN, "x", null, [3], {"a": 1}, -0, 1e400, 4], "samples_us": [], "o": {"b": [1, 2], "a": "x"}}`,
	`{"latency_us": 1, "tflops": 2, "latency_us": 3}`,
	`{"latency_us": [1, 2], "latency_us": 5}`,
	" {\n \"latency_us\" : 2.5 ,\t\"l\" : [ 1 , 2 ] , \"o\" : { } } ",
}

// TestMetricsAreTheTree: the typed metrics of a row are what the tree of its metrics
// object says — each member's name in place, its number (and whether it is one), a list's
// numbers, and the value's text as pyjson.Scalar writes it — on the docs at the edges
// and on generated ones.
func TestMetricsAreTheTree(t *testing.T) {
	docs := slices.Clone(metricsDocs)
	rng := rand.New(rand.NewPCG(3, 11))
	for range 3000 {
		docs = append(docs, genMetrics(rng))
	}
	var names []string
	for _, doc := range docs {
		v, err := pyjson.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		o := v.(*pyjson.Object)
		var d pyjson.Decoder
		if err := d.Reset([]byte(doc)); err != nil {
			t.Fatal(err)
		}
		ms, err := decodeMetrics(&d, []byte(doc), &names)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if len(ms) != o.Len() {
			t.Fatalf("%s: %d metrics, the tree %d", doc, len(ms), o.Len())
		}
		for i, mem := range o.Members() {
			m := &ms[i]
			if m.Name != mem.Key {
				t.Errorf("%s: metric %d is %q, the tree's %q", doc, i, m.Name, mem.Key)
			}
			f1, ok1 := m.Number()
			f2, ok2 := treeNumber(mem.Value)
			if ok1 != ok2 || (ok1 && (f1 != f2 || math.Signbit(f1) != math.Signbit(f2))) {
				t.Errorf("%s: %s is %v %v, the tree's %v %v", doc, m.Name, f1, ok1, f2, ok2)
			}
			if got, want := m.Text(), pyjson.Scalar(mem.Value); got != want {
				t.Errorf("%s: %s's text %q, the tree's %q", doc, m.Name, got, want)
			}
			xs, isList := mem.Value.([]pyjson.Value)
			if isList != (m.Kind == MetricList) {
				t.Errorf("%s: %s is a list: %v, the tree says %v", doc, m.Name, m.Kind == MetricList, isList)
			}
			var want []float64
			for _, x := range xs {
				if f, ok := treeNumber(x); ok {
					want = append(want, f)
				}
			}
			if !slices.Equal(m.List, want) {
				t.Errorf("%s: %s's numbers %v, the tree's %v", doc, m.Name, m.List, want)
			}
			// the headline's value as the verdict reads it: a number (±Inf and NaN too) or not
			_, isInt := mem.Value.(pyjson.Int)
			_, isFloat := mem.Value.(float64)
			if (m.Kind <= MetricFloat) != (isInt || isFloat) {
				t.Errorf("%s: %s kind %d, the tree's %T", doc, m.Name, m.Kind, mem.Value)
			}
			if isFloat && math.Float64bits(m.Value) != math.Float64bits(mem.Value.(float64)) && !math.IsNaN(m.Value) {
				t.Errorf("%s: %s is %v, the tree's %v", doc, m.Name, m.Value, mem.Value)
			}
		}
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(names))); len(distinct) != len(names) {
		t.Errorf("a name kept twice: %v", names)
	}
}

// A row's metrics are its own: another row's read later, in the same file, leaves them as
// they were.
func TestRowsMetricsAreTheirOwn(t *testing.T) {
	var rows []string
	for i := range 300 {
		rows = append(rows, fmt.Sprintf(`{"status": "ok", "metrics": {"latency_us": %d, "latency_us_samples": [%d, %d], "x%d": 1, "latency_us": %d}}`, i, i, i+1, i%3, i+1))
	}
	rows = append(rows, `{"status": "ok", "metrics": {}}`, `{"status": "ok", "metrics": 5}`, `{"status": "ok"}`)
	var f ResultsFile
	if err := decodeResults([]byte(`{"rows": [`+strings.Join(rows, ", ")+`]}`), KeyedRows, &f); err != nil {
		t.Fatal(err)
	}
	for i, r := range f.Rows[:300] {
		want := fmt.Sprintf("latency_us=%d latency_us_samples=[%d, %d] x%d=1", i+1, i, i+1, i%3)
		var got []string
		for _, m := range r.Metrics {
			got = append(got, m.Name+"="+m.Text())
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("row %d: %s, want %s", i, strings.Join(got, " "), want)
		}
	}
	if m := f.Rows[300].Metrics; m == nil || len(m) != 0 {
		t.Errorf("an empty object is no metrics: %v", m)
	}
	if f.Rows[301].Metrics != nil || f.Rows[302].Metrics != nil {
		t.Errorf("metrics that are no object, or none, are nil: %v %v", f.Rows[301].Metrics, f.Rows[302].Metrics)
	}
}

// genMetrics is a metrics object of random members.
func genMetrics(rng *rand.Rand) string {
	names := []string{"latency_us", "tflops", "latency_lo_us", "latency_hi_us", "bytes", "latency_us_samples", "gbps", "x"}
	var parts []string
	for range rng.IntN(7) {
		var v string
		switch rng.IntN(9) {
		case 0:
			v = fmt.Sprint(rng.IntN(100000) - 50)
		case 1:
			v = fmt.Sprintf("%g", rng.NormFloat64()*1e3)
		case 2:
			v = []string{"1.0", "-0", "-0.0", "1e400", "2.5E-3", "NaN", "Infinity", "-Infinity", "100000000000000000000000", "1e22", "123456789012345678"}[rng.IntN(11)]
		case 3:
			v = `"` + []string{"1.5", "", `q\"t`, `\u00e9`}[rng.IntN(4)] + `"`
		case 4:
			v = []string{"true", "false", "null"}[rng.IntN(3)]
		case 5:
			v = `{"p50": 1, "n": [2]}`
		case 6:
			var xs []string
			for range rng.IntN(6) {
				xs = append(xs, []string{"1", "2.5", "NaN", `"s"`, "null", "[1]", "-0", "1e400", "7e-3"}[rng.IntN(9)])
			}
			v = "[" + strings.Join(xs, ", ") + "]"
		default:
			v = fmt.Sprintf("%.3f", rng.Float64()*100)
		}
		parts = append(parts, `"`+names[rng.IntN(len(names))]+`": `+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
