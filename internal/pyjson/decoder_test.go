package pyjson

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// rebuild walks a document with the Decoder alone (Object, Array, and Value for scalars
// only), building what Parse builds.
func rebuild(data []byte) (Value, error) {
	d, err := NewDecoder(data)
	if err != nil {
		return nil, err
	}
	var walk func() (Value, error)
	walk = func() (Value, error) {
		switch d.Kind() {
		case '{':
			o := NewObject()
			err := d.Object(func(key []byte) error {
				v, err := walk()
				o.Set(string(key), v)
				return err
			})
			return o, err
		case '[':
			a := []Value{}
			err := d.Array(func(int) error {
				v, err := walk()
				a = append(a, v)
				return err
			})
			return a, err
		}
		return d.Value()
	}
	v, err := walk()
	if err != nil {
		return nil, err
	}
	return v, d.End()
}

// The Decoder is Parse's grammar: every document, valid or not, gives the same value or
// the same error (its line and column) whichever way it is read; members a reader leaves
// untaken are checked all the same.
func TestDecoderIsParse(t *testing.T) {
	docs := []string{`{"a": 1,}`, "[1,\n 2", `[1] x`, "\xef\xbb\xbf[]", "[\"\xff\"]", `"a` + "\n" + `"`, `[01]`, ``,
		`{"a" 1}`, `["\x"]`, strings.Repeat("[", 600), strings.Repeat("[", 512) + strings.Repeat("]", 512),
		strings.Repeat("[", 513) + strings.Repeat("]", 513), `{"a":1,"a":2,"b":{"c":[NaN,-Infinity]}}`,
		`{"k\u00e9y": 1, "\ud800": [1.5e300, -0]}`, `{"b": 1, "a": {"d": [], "c": {}}, "b": 2, "\u0062": 3}`,
		`[-0.0, 1E5, 1e400, -1e400, 0.1, 12345678901234567890123, -0, "\u00e9\n\"", "é", "\ud83d\ude00"]`, `{"é": 1, "e": 2, "\u0001": 3}`, "[1,, \"\xff\"]", "[1] \xfe", "[1, \xc3\xa9]", "{\"a\xff\": 1}",
		"{\"\xc3\xa9\": \"\xed\xa0\x80\"}", "[\"\xc3\xa9\", \"x\", 1, \"\xe2\x82\"]", "{\"\xc3\xa9\": [\"\xf0\x9f\x98\x80\"]}", `{"a": [1, {"b": }]}`, `  {}  `, `[]`, `{"a":[1,2`, `{1: 2}`}
	r := rand.New(rand.NewPCG(7, 7))
	for range 300 {
		doc := randomValue(r, 0)
		docs = append(docs, doc)
		if len(doc) > 2 { // and cut short or broken somewhere
			i := r.IntN(len(doc))
			docs = append(docs, doc[:i], doc[:i]+"@"+doc[i:])
		}
	}
	for _, doc := range docs {
		want, wantErr := Parse([]byte(doc))
		got, err := rebuild([]byte(doc))
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%q: decoder says %v, Parse %v", doc, err, wantErr)
			continue
		}
		if err == nil && !bytes.Equal(MustMarshal(got, Default), MustMarshal(want, Default)) {
			t.Errorf("%q: decoder built %s, Parse %s", doc, MustMarshal(got, Default), MustMarshal(want, Default))
		}
		// the canonical text, written as it is read, is Marshal's of what Parse builds
		d, err := NewDecoder([]byte(doc))
		var canon []byte
		if err == nil {
			if canon, err = d.Canonical([]byte("x")); err == nil {
				err = d.End()
			}
		}
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%q: Canonical says %v, Parse %v", doc, err, wantErr)
		} else if err == nil && string(canon) != "x"+string(MustMarshal(want, Identity)) {
			t.Errorf("%q: Canonical wrote %s, Marshal %s", doc, canon, MustMarshal(want, Identity))
		}
		// CanonicalText writes the same, and hands over the value's own text
		if d, err := NewDecoder([]byte(doc)); err == nil && wantErr == nil {
			c2, text, err := d.CanonicalText(nil)
			if err != nil || string(c2) != string(canon[1:]) || string(text) != strings.TrimSpace(doc) {
				t.Errorf("%q: CanonicalText wrote %s and %q (%v)", doc, c2, text, err)
			}
		}
		// a reader that takes nothing: the document is still checked whole
		d, err = NewDecoder([]byte(doc))
		if err == nil {
			switch d.Kind() {
			case '{':
				err = d.Object(func([]byte) error { return nil })
			case '[':
				err = d.Array(func(int) error { return nil })
			default:
				err = d.Skip()
			}
			if err == nil {
				err = d.End()
			}
		}
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%q: a decoder taking nothing says %v, Parse %v", doc, err, wantErr)
		}
	}
}

// AppendText is Text appended, Literal a number's or a literal's text; each checks and
// skips what is not its kind, and Reset reads again from the start.
func TestAppendTextAndLiteral(t *testing.T) {
	doc := []byte(`{"s": "a\"b\u00e9", "p": "plain é", "n": -0.5e3, "t": true, "o": {"x": 1}, "bad": "\ud800x"}`)
	var d Decoder
	for range 2 {
		if err := d.Reset(doc); err != nil {
			t.Fatal(err)
		}
		var got []string
		err := d.Object(func(key []byte) error {
			if text, ok, err := d.Literal(); ok || err != nil {
				got = append(got, string(key)+"#"+string(text))
				return err
			}
			return nil
		})
		if err != nil || strings.Join(got, ",") != "n#-0.5e3,t#true" {
			t.Fatalf("literals %q, %v", got, err)
		}
		d.Reset(doc)
		var texts []byte
		d.Object(func(key []byte) error {
			var err error
			var ok bool
			if texts, ok, err = d.AppendText(texts); ok {
				texts = append(texts, '|')
			}
			return err
		})
		if want := "a\"b\u00e9|plain é|\xed\xa0\x80x|"; string(texts) != want {
			t.Fatalf("texts %q, want %q", texts, want)
		}
	}
	if err := d.Reset([]byte("\xef\xbb\xbf{}")); err == nil {
		t.Error("Reset takes a byte-order mark")
	}
	d.Reset([]byte(`"\x01"`))
	if _, _, err := d.AppendText(nil); err == nil {
		t.Error("AppendText takes a control character")
	}
}

// Number reads a literal's text as Parse reads it.
func TestNumberIsParse(t *testing.T) {
	for _, text := range []string{"0", "-0", "7", "-12", "12345678901234567890123", "1" + strings.Repeat("0", 400), "1.0", "-0.0", "2.5E-3",
		"1e400", "-1e400", "1e22", "NaN", "Infinity", "-Infinity", "null", "true", "false"} {
		v, err := Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		f, digits, ok := Number([]byte(text))
		switch x := v.(type) {
		case Int:
			want, _ := strconv.ParseFloat(string(x), 64)
			if !ok || string(digits) != string(x) || math.Float64bits(f) != math.Float64bits(want) {
				t.Errorf("%s: %v %q %v, Parse %q", text, f, digits, ok, x)
			}
		case float64:
			if !ok || digits != nil || (math.Float64bits(f) != math.Float64bits(x) && !(math.IsNaN(f) && math.IsNaN(x))) {
				t.Errorf("%s: %v %q %v, Parse %v", text, f, digits, ok, x)
			}
		default:
			if ok {
				t.Errorf("%s: a number %v, Parse %v", text, f, x)
			}
		}
	}
}
