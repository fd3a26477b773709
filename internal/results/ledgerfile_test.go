package results

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

// jq is s as a JSON string.
func jq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// encodeCaseDoc is a ledger line as encoding/json writes it: what appendCaseDoc must write.
func encodeCaseDoc(c *Case) ([]byte, error) {
	var out bytes.Buffer
	doc := caseDoc{Key: c.Key, Shard: c.Shard, Testlist: c.Testlist, Op: c.Op, Backend: c.Backend, WorldSize: c.WorldSize,
		Cluster: c.Cluster, Status: c.Status, Message: c.Message, Attempt: c.Attempt, Tries: c.Tries, GPUSeconds: c.GPUSeconds, Reached: c.Reached}
	err := EncodeWithArgs(json.NewEncoder(&out), &doc, &doc.Args, c.ArgsJSON)
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), err
}

// A ledger line is written as encoding/json writes its caseDoc, byte for byte and error
// for error: args as the case keys have them (json.dumps(args, sort_keys=True) of values
// drawn with HTML characters, escapes, non-ASCII, NaN and Infinity, nesting and lists),
// texts of other forms, and cases drawn around them.
func TestAppendCaseDocIsEncodeWithArgs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	strs := []string{"", "m", "a<b>&c", `q"uote\back`, "tab\tnl\n", "é 日本 😀", "\u2028", "\x01", "dtype", "bf16"}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(9); {
		case k == 0 && depth < 3:
			var members []string
			for range r.IntN(4) {
				members = append(members, jq(strs[r.IntN(len(strs))])+": "+value(depth+1))
			}
			return "{" + strings.Join(members, ", ") + "}"
		case k == 1 && depth < 3:
			return "[" + value(depth+1) + ", " + value(depth+1) + "]"
		case k == 2:
			return jq(strs[r.IntN(len(strs))])
		case k == 3:
			return []string{"NaN", "Infinity", "-Infinity", "1e400", "true", "false", "null"}[r.IntN(7)]
		case k == 4:
			return strconv.FormatFloat(math.Float64frombits(r.Uint64()>>2), 'g', -1, 64)
		default:
			return strconv.Itoa(r.IntN(1 << 20))
		}
	}
	args := []string{`{}`, `{"m": 1}`, `{"a": {"dtype": "bf16"}, "k": 4096, "m": 128, "n": 4096, "out": "bf16"}`,
		`{"x": NaN}`, `{"x": -Infinity}`, `{"s": "<&>"}`, `{"s": "\u00e9\n"}`}
	for range 3000 {
		doc := "{" + jq(strs[r.IntN(len(strs))]) + ": " + value(0) + ", \"m\": " + value(0) + "}"
		v, err := pyjson.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		args = append(args, string(pyjson.MustMarshal(v, pyjson.Identity))) // as a case key has them
	}
	// texts of other forms: encoding/json's own way
	args = append(args, "{\"m\":1}", "{\"m\":\t1}", "{m: 1}", `{"m": "unterminated}`, "{\"é\": 1}", `{"a": "x\`, "", "[1, 2]", `"<>"`)
	for i, a := range args {
		c := Case{Key: strs[i%len(strs)], Shard: "s-1", Testlist: strs[(i+1)%len(strs)], Op: "gemm", Backend: strs[(i+2)%len(strs)],
			WorldSize: i % 9, Cluster: strs[(i+3)%len(strs)], ArgsJSON: a, Status: "ok", Attempt: i % 3, Tries: i % 4,
			GPUSeconds: []float64{0, 1.5, 1e-7, 3e21, 25131.833535048496, math.NaN(), math.Inf(1)}[i%7], Reached: i%2 == 0}
		if i%5 == 0 {
			c.Message = strs[i%len(strs)]
		}
		want, wantErr := encodeCaseDoc(&c)
		got, err := appendCaseDoc([]byte("x"), &c)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("args %q: appendCaseDoc says %v, encoding/json %v", a, err, wantErr)
		}
		if err == nil && string(got) != "x"+string(want) {
			t.Fatalf("args %q:\n appendCaseDoc %s\n encoding/json %s", a, got[1:], want)
		}
	}
}
