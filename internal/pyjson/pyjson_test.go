package pyjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestFloatRepr(t *testing.T) {
	cases := map[float64]string{
		1: "1.0", 1e6: "1000000.0", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05",
		0.0001: "0.0001", 1.5: "1.5", 1.702: "1.702", 7: "7.0", 2.5: "2.5", 0: "0.0",
		math.Copysign(0, -1): "-0.0", -1.5e-7: "-1.5e-07", 1.2345e+300: "1.2345e+300",
		123456789012345678: "1.2345678901234568e+17",
		math.Inf(1):        "Infinity", math.Inf(-1): "-Infinity", 5e-324: "5e-324",
	}
	tenth, fifth := 0.1, 0.2
	cases[tenth+fifth] = "0.30000000000000004"
	for f, want := range cases {
		if got := FloatRepr(f); got != want {
			t.Errorf("FloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestModes(t *testing.T) {
	v, err := Parse([]byte(`{"b": [1, 2.0, {"z": null, "a": true}], "a": "x<&>é😀\u007f\ud800", "e": [], "o": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"identity": `{"a": "x<&>\u00e9\ud83d\ude00\u007f\ud800", "b": [1, 2.0, {"a": true, "z": null}], "e": [], "o": {}}`,
		"default":  `{"b": [1, 2.0, {"z": null, "a": true}], "a": "x<&>\u00e9\ud83d\ude00\u007f\ud800", "e": [], "o": {}}`,
		"compact":  `{"b":[1,2.0,{"z":null,"a":true}],"a":"x<&>\u00e9\ud83d\ude00\u007f\ud800","e":[],"o":{}}`,
		"file": "{\n  \"b\": [\n    1,\n    2.0,\n    {\n      \"z\": null,\n      \"a\": true\n    }\n  ],\n" +
			"  \"a\": \"x<&>\\u00e9\\ud83d\\ude00\\u007f\\ud800\",\n  \"e\": [],\n  \"o\": {}\n}\n",
	}
	got := map[string]string{
		"identity": string(MustMarshal(v, Identity)),
		"default":  string(MustMarshal(v, Default)),
		"compact":  string(MustMarshal(v, Compact)),
	}
	f, _ := marshalFile(v)
	got["file"] = string(f)
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s:\n got %s\nwant %s", k, got[k], want[k])
		}
	}
}

func TestParseKeepsOrderIntsAndDuplicates(t *testing.T) {
	v, err := Parse([]byte(`{"z": 1, "a": 1.0, "z": -0, "big": 123456789012345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*Object)
	if got := strings.Join(o.Keys(), ","); got != "z,a,big" {
		t.Fatalf("keys %s", got)
	}
	if z, _ := o.Get("z"); z != Int("0") {
		t.Fatalf("z = %#v", z)
	}
	if a, _ := o.Get("a"); a != 1.0 {
		t.Fatalf("a = %#v", a)
	}
	if got := string(MustMarshal(v, Default)); got != `{"z": 0, "a": 1.0, "big": 123456789012345678901234567890}` {
		t.Fatal(got)
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": 1,}`:      "line 1 column 9: expecting property name",
		"[1,\n 2":        "line 2 column 3: expecting ',' delimiter, found end of input",
		`[1] x`:          "extra data",
		"\xef\xbb\xbf[]": "byte-order mark",
		"[\"\xff\"]":     "invalid UTF-8 byte 0xff",
		// found wherever it lies, and before any other fault, as Python decodes first
		"[1,, \"\xff\"]":                         "line 1 column 7: invalid UTF-8 byte 0xff",
		"[1] \xfe":                               "line 1 column 5: invalid UTF-8 byte 0xfe",
		"[1, \xc3\xa9]":                          "line 1 column 5: expecting value",
		"[1, \xc3]":                              "line 1 column 5: invalid UTF-8 byte 0xc3",
		"{\"a\xff\": 1}":                         "line 1 column 4: invalid UTF-8 byte 0xff",
		"{\"\xc3\xa9\": \"\xed\xa0\x80\"}":       "line 1 column 9: invalid UTF-8 byte 0xed",
		"[\"\xc3\xa9\", \"x\", 1, \"\xe2\x82\"]": "line 1 column 17: invalid UTF-8 byte 0xe2",
		`"a` + "\n" + `"`:                        "invalid control character",
		`[01]`:                                   "expecting ',' delimiter",
		``:                                       "expecting value, found end of input",
		`{"a" 1}`:                                "expecting ':' delimiter",
		`["\x"]`:                                 "invalid \\escape",
		strings.Repeat("[", 600):                 "nesting deeper",
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}

// randomValue builds values that exercise every rule: key order, ints vs floats,
// float formatting at the exponent switch points, escapes and astral characters.
func randomValue(r *rand.Rand, depth int) string {
	strs := []string{"a", "b", "Z", "é", "😀", "<&>", "q\"uote", "back\\slash", "tab\t", "\u007f", "\u2028", "", "ns/name"}
	switch k := r.IntN(9); {
	case depth > 3 || k < 2:
		return fmt.Sprint(r.Int64N(1<<40) - 1<<39)
	case k == 2:
		exps := []float64{1e-7, 1e-5, 1e-4, 1e-3, 1, 1e3, 1e15, 1e16, 1e17, 1e300}
		f := (r.Float64()*10 - 5) * exps[r.IntN(len(exps))]
		if r.IntN(3) == 0 {
			f = math.Round(f)
		}
		return strconvFloat(f)
	case k == 3:
		b, _ := json.Marshal(strs[r.IntN(len(strs))] + strs[r.IntN(len(strs))])
		return string(b)
	case k == 4:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case k < 7:
		n := r.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomValue(r, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		n := r.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			key, _ := json.Marshal(strs[r.IntN(len(strs))] + fmt.Sprint(i))
			parts[i] = string(key) + ": " + randomValue(r, depth+1)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
}

func strconvFloat(f float64) string {
	s := fmt.Sprintf("%v", f)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// TestDifferentialPython compares all four modes with python3's json module on random
// documents. It skips when python3 is absent.
func TestDifferentialPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	r := rand.New(rand.NewPCG(1, 2))
	var docs []string
	for range 400 {
		docs = append(docs, randomValue(r, 0))
	}
	for range 20 { // long arrays of objects that repeat and permute a few keys (the encoder's key cache)
		docs = append(docs, repeatedKeys(r))
	}
	script := `
import json, sys
for line in sys.stdin:
    v = json.loads(line)
    print(json.dumps(json.dumps(v, sort_keys=True)))
    print(json.dumps(json.dumps(v)))
    print(json.dumps(json.dumps(v, separators=(",", ":"))))
    print(json.dumps(json.dumps(v, indent=2) + "\n"))
`
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = strings.NewReader(strings.Join(docs, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != 4*len(docs) {
		t.Fatalf("python printed %d lines for %d docs", len(lines), len(docs))
	}
	for i, doc := range docs {
		v, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		file, _ := marshalFile(v)
		mine := []string{string(MustMarshal(v, Identity)), string(MustMarshal(v, Default)), string(MustMarshal(v, Compact)), string(file)}
		for m := range 4 {
			var want string
			if err := json.Unmarshal(lines[4*i+m], &want); err != nil {
				t.Fatal(err)
			}
			if mine[m] != want {
				t.Fatalf("doc %d mode %d:\n in   %s\n got  %s\n want %s", i, m, doc, mine[m], want)
			}
		}
	}
}

// repeatedKeys is an array of objects drawn from a few keys in varying orders, nested.
func repeatedKeys(r *rand.Rand) string {
	pool := []string{"a", "b", "type", "args", "m", "n", "k", "dtype_a", "testlist", "shape", "\u00e9", ""}
	var obj func(depth int) string
	obj = func(depth int) string {
		keys := r.Perm(len(pool))[:1+r.IntN(5)]
		if r.IntN(3) == 0 { // the same sequence as most of its neighbours
			keys = []int{2, 3}
		}
		var parts []string
		for _, k := range keys {
			v := fmt.Sprint(r.IntN(100))
			if depth < 3 && r.IntN(3) == 0 {
				v = obj(depth + 1)
			}
			parts = append(parts, fmt.Sprintf("%q: %s", pool[k], v))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	var items []string
	for range 300 {
		items = append(items, obj(0))
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// FuzzRoundTrip checks that anything Parse accepts re-encodes to a document that parses
// to the same encoding, and that Parse never panics.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x"]}`, `[1e16, -0.0, 1e-05]`, `"\ud800\udc00\ud800"`, `{"a":1,"a":2}`, `NaN`, `[[[]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		d, derr := NewDecoder(data)
		var canon []byte
		if derr == nil {
			if canon, derr = d.Canonical(nil); derr == nil {
				derr = d.End()
			}
		}
		if (err == nil) != (derr == nil) {
			t.Fatalf("%q: Parse says %v, the decoder's Canonical %v", data, err, derr)
		}
		if err != nil {
			return
		}
		if want := MustMarshal(v, Identity); !bytes.Equal(canon, want) {
			t.Fatalf("%q: Canonical wrote %s, Marshal %s", data, canon, want)
		}
		// Detach's compact copy reads as the same value, and holds no white space between
		// tokens (its strings' own are kept)
		compact := appendCompact(nil, bytes.TrimLeft(data, " \t\r\n"))
		cv, err := Parse(compact)
		if err != nil {
			t.Fatalf("%q compacted to %q: %v", data, compact, err)
		}
		if a, b := MustMarshal(v, Identity), MustMarshal(cv, Identity); !bytes.Equal(a, b) {
			t.Fatalf("%q compacted to %q: %s, not %s", data, compact, b, a)
		}
		if again := appendCompact(nil, compact); !bytes.Equal(again, compact) {
			t.Fatalf("%q compacted to %q, then to %q", data, compact, again)
		}
		for _, opt := range []Options{Identity, Default, Compact, File} {
			once := MustMarshal(v, opt)
			v2, err := Parse(once)
			if err != nil {
				t.Fatalf("re-parse of %q: %v", once, err)
			}
			if twice := MustMarshal(v2, opt); !bytes.Equal(once, twice) {
				t.Fatalf("not stable: %q then %q", once, twice)
			}
		}
	})
}

// A repeated key keeps its first place and takes the last value, as a Python dict does,
// in small objects (linear scan) and large ones (map).
func TestDuplicateKeys(t *testing.T) {
	var big, bigWant strings.Builder
	big.WriteString(`{`)
	bigWant.WriteString(`{`)
	n := indexAt + 8
	for i := 0; i < n; i++ {
		fmt.Fprintf(&big, `"k%d": %d, `, i, i)
		switch i {
		case 3:
			bigWant.WriteString(`"k3": "again", `)
		case n - 1:
			fmt.Fprintf(&bigWant, `"k%d": null, `, i)
		default:
			fmt.Fprintf(&bigWant, `"k%d": %d, `, i, i)
		}
	}
	fmt.Fprintf(&big, `"k3": "again", "k%d": null, "z": 1}`, n-1)
	bigWant.WriteString(`"z": 1}`)
	for doc, want := range map[string]string{
		`{"a": 1, "b": 2, "a": 3}`:          `{"a": 3, "b": 2}`,
		`{"a": {"x": 1, "x": 2}, "a": [1]}`: `{"a": [1]}`,
		big.String():                        bigWant.String(),
	} {
		v, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(MustMarshal(v, Default)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", doc, got, want)
		}
		if o := v.(*Object); o.Len() > indexAt {
			if x, _ := o.Get("k3"); x != "again" {
				t.Errorf("lookup after a large parse: %v", x)
			}
		}
	}
}

type failAfter struct {
	n   int
	out bytes.Buffer
}

func (f *failAfter) Write(b []byte) (int, error) {
	if f.out.Len()+len(b) > f.n {
		return 0, fmt.Errorf("disk full")
	}
	return f.out.Write(b)
}

// Encode streams Marshal's bytes in every mode; an unencodable value or a failing writer
// is an error.
func TestEncodeStreams(t *testing.T) {
	var cells []Value
	for i := range 3000 { // more than one flush
		cases := make([]Value, i%5)
		for j := range cases {
			cases[j] = Obj("testlist", "tl", "shape", Obj("m", i*j, "dtype", "fp8\u00e9"))
		}
		cells = append(cells, Obj("id", fmt.Sprint("c", i), "cases", cases, "n", []Value{NewInt(int64(i))}))
	}
	doc := Obj("version", 1, "include", cells, "tail", []Value{Obj(), []Value{}, Obj("a", 1), Obj("b", 2)})
	for _, opt := range []Options{File, Default, Identity, Compact} {
		var got bytes.Buffer
		if err := Encode(&got, doc, opt); err != nil {
			t.Fatal(err)
		}
		if want := MustMarshal(doc, opt); !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%+v: streamed encoding differs from Marshal", opt)
		}
	}
	bad := append(append([]Value{}, cells[:10]...), Obj("x", struct{}{}))
	if err := Encode(io.Discard, Obj("include", bad), File); err == nil || !strings.Contains(err.Error(), "cannot encode") {
		t.Fatalf("unencodable item: %v", err)
	}
	w := &failAfter{n: len(MustMarshal(doc, File)) / 2}
	if err := Encode(w, doc, File); err == nil || err.Error() != "disk full" {
		t.Fatalf("failing writer: %v", err)
	}
}

// ParseDepth builds the top of a document and checks the rest exactly as Parse does:
// deeper containers come back as their text, and an error anywhere is Parse's error.
func TestParseDepth(t *testing.T) {
	doc := `{"rows": [{"op": {"args": {"m": 1}}, "status": "ok", "metrics": {"t": NaN}}, {"status": ["x"], "n": 1.5}]}`
	v, err := ParseDepth([]byte(doc), 3)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := v.(*Object).Array("rows")
	r0, r1 := rows[0].(*Object), rows[1].(*Object)
	if op, _ := r0.Get("op"); string(op.(Raw)) != `{"args": {"m": 1}}` {
		t.Fatalf("op = %#v", op)
	}
	if st, _ := r0.Get("status"); st != "ok" {
		t.Fatalf("status = %#v", st)
	}
	st, _ := r1.Get("status")
	full, err := Parse(st.(Raw))
	if err != nil || string(MustMarshal(full, Default)) != `["x"]` {
		t.Fatalf("status = %#v (%v)", full, err)
	}
	if n, _ := r1.Get("n"); n != 1.5 {
		t.Fatalf("n = %#v", n)
	}
	for _, bad := range []string{
		`{"rows": [{"op": {"args": {"m": 01}}}]}`,
		`{"rows": [{"op": {"args": {"m": "a\qb"}}}]}`,
		`{"rows": [{"op": {"args": {"m": [1,]}}}]}`,
		`{"rows": [{"op": {"args": {"m": "\ud800"` + "\x01" + `"}}}]}`,
		`{"rows": [{"op": {"args": {"m": 1}}}]`,
		`{"rows": [{"op": {"args": {"m" 1}}}]}`,
	} {
		_, want := Parse([]byte(bad))
		_, got := ParseDepth([]byte(bad), 3)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s: ParseDepth says %v, Parse %v", bad, got, want)
		}
	}
}

// BenchmarkMarshalSmall encodes one small object per call, as loading results does for
// each row's args.
func BenchmarkMarshalSmall(b *testing.B) {
	row := Obj("m", 8192, "n", 7168, "k", 2048, "dtype_a", "fp8", "dtype_b", "fp8", "dtype_out", "bf16")
	for b.Loop() {
		if _, err := Marshal(row, Identity); err != nil {
			b.Fatal(err)
		}
	}
}

// Changing an object, or a clone of it, leaves the others as they were.
func TestCloneIsIndependent(t *testing.T) {
	v, err := Parse([]byte(`[{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]`))
	if err != nil {
		t.Fatal(err)
	}
	objs := v.([]Value)
	o0, o1, o2 := objs[0].(*Object), objs[1].(*Object), objs[2].(*Object)
	o0.Set("c", NewInt(7))
	o1.Delete("a")
	o2.Set("a", NewInt(9))
	c := o2.Clone()
	c.Set("z", NewInt(1))
	o2.Set("y", NewInt(2))
	want := `[{"a": 1, "b": 2, "c": 7}, {"b": 4}, {"a": 9, "b": 6, "y": 2}]`
	if got := string(MustMarshal(objs, Default)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := string(MustMarshal(c, Default)); got != `{"a": 9, "b": 6, "z": 1}` {
		t.Fatalf("clone: %s", got)
	}
	m := o0.Members()
	_ = append(m, Member{"x", nil})
	if o0.Has("x") || o0.Len() != 3 {
		t.Fatal("appending to Members() changed the object")
	}
}

// An object that grows between two encodings, and large objects (looked up through a
// map), come out right.
func TestEncoderFollowsGrowth(t *testing.T) {
	o := Obj("b", 1, "a", 2)
	if got := string(MustMarshal(o, Identity)); got != `{"a": 2, "b": 1}` {
		t.Fatalf("got %s", got)
	}
	o.Set("0", NewInt(3))
	if got := string(MustMarshal(o, Identity)); got != `{"0": 3, "a": 2, "b": 1}` {
		t.Fatalf("after Set: %s", got)
	}
	big := NewObject()
	var want []string
	for i := 40; i > 0; i-- {
		k := fmt.Sprintf("k%02d", i)
		big.Set(k, NewInt(int64(i)))
		want = append(want, fmt.Sprintf(`"%s": %d`, k, i))
	}
	if v, ok := big.Get("k07"); !ok || v != NewInt(7) {
		t.Fatalf("k07 = %v, %v", v, ok)
	}
	slices.Sort(want)
	if got := string(MustMarshal(big, Identity)); got != "{"+strings.Join(want, ", ")+"}" {
		t.Fatalf("large object: %s", got)
	}
	big.Delete("k07")
	if _, ok := big.Get("k07"); ok || big.Len() != 39 {
		t.Fatal("Delete left k07 in the large object")
	}
}

// Objects that repeat, permute, escape or repeat keys parse as Python's json.loads does.
func TestKeys(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[{"m": 1, "n": 2}, {"m": 3, "n": 4}]`, `[{"m": 1, "n": 2}, {"m": 3, "n": 4}]`},
		{`[{"m": 1, "n": 2}, {"mm": 3, "n": 4}]`, `[{"m": 1, "n": 2}, {"mm": 3, "n": 4}]`},
		{`[{"mm": 1, "n": 2}, {"m": 3, "n": 4}]`, `[{"mm": 1, "n": 2}, {"m": 3, "n": 4}]`},
		{`[{"m": 1, "n": 2}, {"m": 3}]`, `[{"m": 1, "n": 2}, {"m": 3}]`},
		{`[{"m": 1}, {"m": 3, "n": 4, "m": 5}]`, `[{"m": 1}, {"m": 5, "n": 4}]`},
		{`[{"m": 1, "n": 2}, {"m": 3, "m": 4}]`, `[{"m": 1, "n": 2}, {"m": 4}]`},
		{`[{"m": 1, "n": 2}, {"\u006d": 3, "n": 4}]`, `[{"m": 1, "n": 2}, {"m": 3, "n": 4}]`},
		{`[{"a\"b": 1}, {"a\"b": 2}]`, `[{"a\"b": 1}, {"a\"b": 2}]`},
		{`[{"a\nb": 1}, {"a\nb": 2}]`, `[{"a\nb": 1}, {"a\nb": 2}]`},
		{`[{"x": {"m": 1}}, {"x": {"m": 2, "k": 3}}, {"x": {"m": 4}}]`, `[{"x": {"m": 1}}, {"x": {"m": 2, "k": 3}}, {"x": {"m": 4}}]`},
	} {
		v, err := Parse([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := string(MustMarshal(v, Default)); got != c.want {
			t.Errorf("%s\n got  %s\n want %s", c.in, got, c.want)
		}
	}
	// a raw control character where the predicted key had an escaped one is an error
	if _, err := Parse([]byte("[{\"a\\nb\": 1}, {\"a\nb\": 2}]")); err == nil {
		t.Error("a raw newline in a key was accepted")
	}
}

// marshalFile is write_json's text, as files.WriteJSON writes it: indent=2 and a newline.
func marshalFile(v Value) ([]byte, error) {
	out, err := Marshal(v, File)
	return append(out, '\n'), err
}
