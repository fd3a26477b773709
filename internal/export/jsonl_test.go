package export

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/results"
)

// A JSON line is written as writeJSONL's Encoder writes its record (HTML left as it is,
// the args by results.EncodeWithArgs), byte for byte and error for error: args as case keys
// have them (json.dumps(args, sort_keys=True) of values drawn with HTML characters,
// escapes, non-ASCII, NaN and Infinity, nesting and lists) and texts of other forms,
// metrics and judged work drawn around edge strings and floats; a record with counters is
// left to encoding/json.
func TestAppendRecordIsEncoder(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 13))
	strs := []string{"", "m", "a<b>&c", `q"uote\back`, "tab\tnl\n", "é 日本 😀", "\u2028", "\x01", "bad \xff", "latency_us"}
	floats := []float64{0, math.Copysign(0, -1), 1.5, 1e-7, 3e21, 25131.833535048496, 123456, math.NaN(), math.Inf(-1)}
	jq := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(9); {
		case k == 0 && depth < 3:
			var members []string
			for range r.IntN(4) {
				members = append(members, jq(strs[r.IntN(len(strs)-1)])+": "+value(depth+1))
			}
			return "{" + strings.Join(members, ", ") + "}"
		case k == 1 && depth < 3:
			return "[" + value(depth+1) + ", " + value(depth+1) + "]"
		case k == 2:
			return jq(strs[r.IntN(len(strs)-1)])
		case k == 3:
			return []string{"NaN", "Infinity", "-Infinity", "1e400", "true", "false", "null"}[r.IntN(7)]
		case k == 4:
			return strconv.FormatFloat(math.Float64frombits(r.Uint64()>>2), 'g', -1, 64)
		default:
			return strconv.Itoa(r.IntN(1 << 20))
		}
	}
	args := []string{`{}`, `{"a": {"dtype": "bf16"}, "k": 4096, "m": 128, "n": 4096, "out": "bf16"}`, `{"x": NaN}`, `{"s": "<&>"}`,
		"{\"m\":1}", "{\"m\":\t1}", "{m: 1}", `{"m": "unterminated}`, "{\"é\": 1}", `{"a": "x\`, "", `"<>"`}
	for range 3000 {
		doc := "{" + jq(strs[r.IntN(len(strs)-1)]) + ": " + value(0) + ", \"m\": " + value(0) + "}"
		v, err := pyjson.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		args = append(args, string(pyjson.MustMarshal(v, pyjson.Identity)))
	}
	str := func() string { return strs[r.IntN(len(strs))] }
	num := func() float64 {
		if r.IntN(6) == 0 {
			return floats[r.IntN(len(floats))]
		}
		return []float64{0, 1.5, 1e-7, 3e21, 0.1, 7}[r.IntN(6)]
	}
	written, failed, left := 0, 0, 0
	for i, a := range args {
		rec := jsonRecord{Key: str(), Shard: str(), Attempt: r.IntN(3), RunID: str(), SourceSHA: str(), StartedAt: str(), Host: str(), Testlist: str(), OpType: str(), ArgsLabel: str(), Backend: str(),
			Cluster: str(), Runner: str(), WorldSize: r.IntN(9), Status: str(), Message: str(), Tries: r.IntN(4), GPUSecs: num(), Throttled: str(), Contended: str()}
		switch i % 4 {
		case 0:
			rec.Metrics = map[string]float64{}
		case 1:
			rec.Metrics = map[string]float64{str(): num(), str(): num(), "latency_us": num(), "tflops": num()}
		case 2:
			rec.Metrics = nil
		}
		if r.IntN(2) == 0 {
			rec.SOL = &solRecord{AchievedTBPS: num(), AchievedTFLOPS: num(), Bound: str(), Bytes: num(), FLOPs: num(), Impossible: r.IntN(2) == 0,
				Intensity: num(), PctBandwidth: num(), PctCompute: num(), PctRoofline: num(), Source: str()}
			if r.IntN(2) == 0 {
				d := num()
				rec.SOL.FormulaDiff = &d
			}
		}
		if i%50 == 0 {
			rec.Counters = map[string]any{"dram_bytes": 1.0}
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		wantErr := results.EncodeWithArgs(enc, &rec, &rec.Args, a)
		got, ok, err := appendRecord([]byte("x"), &rec, a)
		switch {
		case !ok:
			if rec.Counters == nil || err != nil {
				t.Fatalf("args %q: a record without counters left to encoding/json (%v)", a, err)
			}
			left++
		case (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()):
			t.Fatalf("args %q: appendRecord says %v, the Encoder %v", a, err, wantErr)
		case err != nil:
			failed++
		case string(got)+"\n" != "x"+want.String():
			t.Fatalf("args %q:\n appendRecord %s\n the Encoder  %s", a, got[1:], want.String())
		default:
			written++
		}
	}
	if written < 2000 || failed == 0 || left == 0 {
		t.Fatalf("the draw did not reach every outcome: %d written, %d failed, %d left to encoding/json", written, failed, left)
	}
}
