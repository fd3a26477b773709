package summary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/pyjson"
)

func TestLabelFlattensArgsInOrder(t *testing.T) {
	doc := `{"m": 64, "n": 7168, "a": {"dtype": "fp8", "scale": {"dtype": "fp32", "group": [1, 128]}}, "out": "bf16", "parallel": {"tp": 2}, "b": {"dtype": "bf16"}}`
	want := "m=64 n=7168 a.dtype=fp8 a.scale.dtype=fp32 a.scale.group=[1, 128] out=bf16 parallel.tp=2 b=bf16"
	a, err := ParseArgs([]byte(doc))
	if err != nil || a.Label() != want {
		t.Fatalf("label %q, %v", a.Label(), err)
	}
	v, _ := pyjson.Parse([]byte(doc))
	if b := treeArgs(v.(*pyjson.Object)); b.Label() != want {
		t.Fatalf("label of the tree %q", b.Label())
	}
}

// argsDocs are args texts at the edges: every kind of value, escapes, numbers as Python
// writes them, objects of one dtype or not, and what the one pass leaves to the tree
// (lists, repeated keys).
var argsDocs = []string{
	`{}`,
	`{"m": 128, "n": 128, "k": 128, "a": "fp32", "out": "fp32"}`,
	`{"m": 4096, "n": 7168, "k": 2048, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}`,
	`{"f": 1.0, "g": 1e5, "h": -0, "i": -0.0, "j": 1E400, "k": -1e400, "l": NaN, "m": Infinity, "n": -Infinity, "o": 12345678901234567890123}`,
	`{"s": "a\"b\\c\u00e9\ud83d\ude00", "t": "é", "u": "", "v": "\u0000"}`,
	`{"k\u00e9y": 1, "z": 2, "a": 3, "b": 4.5}`,
	`{"t": true, "f": false, "n": null}`,
	`{"a": 999999999999999, "b": -999999999999999, "c": 9007199254740993, "d": -9007199254740993, "e": 0, "f": 7, "g": 999999999999999999, "h": 1000000000000000001}`,
	`{"a": {"dtype": 3}, "b": {"dtype": "x", "scale": 1}, "c": {}, "d": {"e": {"dtype": "fp8"}}, "g": {"dtype": {"dtype": "fp4"}}}`,
	`{"causal": true, "batch_size": 2, "seq_len_q": 1024, "seq_len_kv": 1024, "num_heads": 32, "num_heads_kv": 8, "head_dim": 128, "dtype_q": "bf16"}`,
	`{"num_tokens": 64, "hidden": 7168, "intermediate": 2048, "num_experts": 256, "top_k": 8, "n_shared_experts": 1, "dtype_weight": "fp8", "dtype_act": "bf16"}`,
	// the tree's: a list, a repeated key (at the top, nested)
	`{"a": {"dtype": "fp8", "scale": {"dtype": "fp32", "group": [1, 128]}}, "out": "bf16"}`,
	`{"m": 1, "n": 2, "m": 3}`,
	`{"a": {"dtype": "x", "dtype": "y"}, "b": 1}`,
	`{"a": {"x": 1, "x": {"dtype": "y"}}}`,
	`{"l": [{"b": 1, "a": 2}, "x", [1.5, NaN]], "m": 1}`,
	" {\n  \"m\": 1 ,\n\t\"a\" : { \"dtype\" : \"bf16\" } } ",
}

// TestParseArgsIsTheTree: the one pass reads every args text as the tree does — the key's
// text, the label, and every typed member the formulas and the report read — on the docs
// at the edges and on generated ones; it leaves to the tree only lists and repeated keys.
func TestParseArgsIsTheTree(t *testing.T) {
	docs := slices.Clone(argsDocs)
	rng := rand.New(rand.NewPCG(7, 29))
	for range 2000 {
		docs = append(docs, genArgs(rng, 0))
	}
	for _, doc := range docs {
		v, err := pyjson.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		o := v.(*pyjson.Object)
		tree := treeArgs(o)
		a, err := ParseArgs([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		canon, _ := pyjson.Marshal(o, pyjson.Identity)
		if a.Text() != string(canon) || tree.Text() != string(canon) {
			t.Errorf("%s: key text %q, tree's %q, want %q", doc, a.Text(), tree.Text(), canon)
		}
		if a.Label() != tree.Label() {
			t.Errorf("%s: label %q, tree's %q", doc, a.Label(), tree.Label())
		}
		for _, k := range append(o.Keys(), "nosuch") {
			f1, ok1 := a.Number(k)
			f2, ok2 := o.Number(k)
			if ok1 != ok2 || (f1 != f2 && !(math.IsNaN(f1) && math.IsNaN(f2))) || math.Signbit(f1) != math.Signbit(f2) {
				t.Errorf("%s: Number(%q) %v %v, tree's %v %v", doc, k, f1, ok1, f2, ok2)
			}
			if s1, ok1 := a.String(k); true {
				s2, ok2 := o.String(k)
				if s1 != s2 || ok1 != ok2 {
					t.Errorf("%s: String(%q) %q %v, tree's %q %v", doc, k, s1, ok1, s2, ok2)
				}
			}
			if b1, ok1 := a.Bool(k); true {
				b2, ok2 := o.Bool(k)
				if b1 != b2 || ok1 != ok2 {
					t.Errorf("%s: Bool(%q) %v %v, tree's %v %v", doc, k, b1, ok1, b2, ok2)
				}
			}
			for _, sub := range []string{"dtype", "scale", "x"} {
				s1, ok1 := a.StringIn(k, sub)
				s2, ok2 := o.StringIn(k, sub)
				if s1 != s2 || ok1 != ok2 {
					t.Errorf("%s: StringIn(%q, %q) %q %v, tree's %q %v", doc, k, sub, s1, ok1, s2, ok2)
				}
			}
		}
		var got, want []string
		for k, f := range a.Numbers() {
			got = append(got, fmt.Sprint(k, f))
		}
		for _, k := range o.Keys() {
			if f, ok := o.Number(k); ok {
				want = append(want, fmt.Sprint(k, f))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: numbers %v, tree's %v", doc, got, want)
		}
		// the one pass reads it unless it has a list or a repeated key
		var b argsBuilder
		var d pyjson.Decoder
		d.Reset([]byte(doc))
		b.reset()
		err = b.object(&d, -1)
		if !b.slow {
			b.canonical(nil, -1) // which finds a repeated key
		}
		if err != nil || b.slow != (strings.Contains(doc, "[") || repeats(doc, o)) {
			t.Errorf("%s: left to the tree: %v, %v", doc, b.slow, err)
		}
	}
}

// repeats is whether doc writes a key twice in an object: it has more members than its
// tree (the docs' strings hold no colon).
func repeats(doc string, o *pyjson.Object) bool {
	return strings.Count(doc, `":`)+strings.Count(doc, `" :`) != members(o)
}

func members(o *pyjson.Object) int {
	n := 0
	for _, m := range o.Members() {
		n++
		if x, ok := m.Value.(*pyjson.Object); ok {
			n += members(x)
		}
	}
	return n
}

// genArgs is an args text of random members: numbers of every form, strings with and
// without escapes, bools, null, objects of one dtype or more, now and then a list or a
// key written twice.
func genArgs(rng *rand.Rand, depth int) string {
	keys := []string{"m", "n", "k", "a", "b", "out", "dtype", "scale", "tp", "causal", "k\\u00e9", "x y"}
	var parts []string
	for range rng.IntN(6) {
		k := keys[rng.IntN(len(keys))]
		var v string
		switch rng.IntN(11) {
		case 0:
			v = fmt.Sprint(rng.IntN(100000) - 50)
		case 1:
			v = fmt.Sprintf("%g", rng.NormFloat64()*1e3)
		case 2:
			v = []string{"1.0", "-0", "-0.0", "1e400", "2.5E-3", "NaN", "Infinity", "-Infinity", "100000000000000000000000"}[rng.IntN(9)]
		case 3:
			v = `"` + []string{"bf16", "fp8", "", `q\"t`, "é", `\u00e9`, `\ud83d\ude00`}[rng.IntN(7)] + `"`
		case 4:
			v = []string{"true", "false", "null"}[rng.IntN(3)]
		case 5:
			v = `{"dtype": "` + []string{"bf16", "fp4", `\n`}[rng.IntN(3)] + `"}`
		case 6:
			if depth < 3 {
				v = genArgs(rng, depth+1)
			} else {
				v = "{}"
			}
		case 7:
			if rng.IntN(8) == 0 {
				v = `[1, {"b": 2, "a": "x"}]`
			} else {
				v = "7"
			}
		default:
			v = fmt.Sprint(rng.IntN(9000))
		}
		parts = append(parts, `"`+k+`": `+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// A results file's rows each get their own args — the ones its last "op" and last "args"
// wrote, none when they are no object — in a file of many rows, and in the next file
// read into the same room.
func TestRowsArgsAreTheirOwn(t *testing.T) {
	var rows, want []string
	for _, doc := range argsDocs {
		rows = append(rows, `{"status": "ok", "op": {"type": "gemm", "args": `+doc+`}}`)
		want = append(want, doc)
	}
	rows = append(rows,
		`{"status": "ok", "op": {"args": {"m": 1}}, "op": {"type": "x"}}`,
		`{"status": "ok", "op": {"args": {"m": 1}, "args": {"n": 2, "l": [1]}}}`,
		`{"status": "ok", "op": {"args": {"m": 1}, "args": 5}}`,
		`{"status": "ok"}`)
	want = append(want, "", `{"n": 2, "l": [1]}`, "", "")
	f := &ResultsFile{}
	for round := range 2 {
		doc := `{"rows": [` + strings.Join(rows, ", ") + `]}`
		if err := decodeResults([]byte(doc), WholeRows, f); err != nil {
			t.Fatal(err)
		}
		for i, r := range f.Rows {
			if want[i] == "" {
				if r.ArgsKey != "{}" || r.Args.Text() != "" || r.Args.Label() != "" {
					t.Errorf("round %d row %d: args %q %q, key %q, want none", round, i, r.Args.Text(), r.Args.Label(), r.ArgsKey)
				}
				continue
			}
			a, err := ParseArgs([]byte(want[i]))
			if err != nil || r.Args.Text() != a.Text() || r.ArgsKey != a.Text() || r.Args.Label() != a.Label() {
				t.Errorf("round %d row %d: args %q %q, key %q, want %q %q", round, i, r.Args.Text(), r.Args.Label(), r.ArgsKey, a.Text(), a.Label())
			}
			for k := range a.Numbers() {
				x, _ := a.Number(k)
				if y, ok := r.Args.Number(k); !ok || (x != y && x == x) {
					t.Errorf("round %d row %d: %s = %v, want %v", round, i, k, y, x)
				}
			}
		}
		slices.Reverse(rows)
		slices.Reverse(want)
	}
}

// treeArgs is the Args of an args object built as a tree: what the one pass is held to.
func treeArgs(o *pyjson.Object) Args {
	text, err := pyjson.Marshal(o, pyjson.Identity)
	if err != nil { // not from a parse: a value JSON cannot hold; its label stands for it
		text = nil
	}
	var b argsBuilder
	b.reset()
	b.tree(-1, o)
	if text == nil {
		text = b.label
	}
	return b.done(text)
}

// One builder reads row after row, each Args' nodes in a part of the builder's room of
// its own: a later row, or an append to an earlier row's nodes, leaves every other as a
// builder used once reads it.
func TestArgsKeepTheirNodes(t *testing.T) {
	var docs []string
	for i := range 600 { // past one room (nodeRoom nodes), about eight nodes a row
		docs = append(docs, fmt.Sprintf(`{"m": %d, "n": 4096, "k": 7168, "a": {"dtype": "bf16", "scale": "s%d"}, "b": {"dtype": "fp8"}, "out": "bf16"}`, i, i))
	}
	var b argsBuilder
	var got []Args
	for _, doc := range docs {
		var d pyjson.Decoder
		if err := d.Reset([]byte(doc)); err != nil {
			t.Fatal(err)
		}
		a, err := b.read(&d, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	for i := range got {
		_ = append(got[i].nodes, argNode{kind: argNumber, num: -1})
	}
	for i, doc := range docs {
		want, err := ParseArgs([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Text() != want.Text() || got[i].Label() != want.Label() || !slices.Equal(got[i].nodes, want.nodes) {
			t.Fatalf("row %d: %s %v, want %s %v", i, got[i].Label(), got[i].nodes, want.Label(), want.nodes)
		}
	}
	if len(b.room) == 0 || cap(b.room) > nodeRoom {
		t.Errorf("room %d of %d, want at most %d", len(b.room), cap(b.room), nodeRoom)
	}
}
