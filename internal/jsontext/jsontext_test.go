package jsontext

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// A Record's strings and floats are what json.Marshal writes of a string and a float64
// (with KeepHTML, what an Encoder that leaves HTML as it is writes),
// byte for byte and error for error: edge cases, then strings of random bytes and runes
// and floats of random bits.
func TestAppendIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "plain", "<script>&amp;</script>", "\b\f\n\r\t\x00\x1f\x7f", `"\`, "é 日本 😀", "\u2028\u2029",
		"bad \xff \xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	for range 5000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
			if r.IntN(2) == 0 {
				const pool = "<>&\"\\\n aé\u2028" // bytes of runes too, cut anywhere
				b[i] = pool[r.IntN(len(pool))]
			}
		}
		strs = append(strs, string(b))
	}
	for _, s := range strs {
		want, _ := json.Marshal(s)
		if got := appendString([]byte("x"), s, true); string(got) != "x"+string(want) {
			t.Fatalf("%q: appendString %s, Marshal %s", s, got[1:], want)
		}
		var enc bytes.Buffer // an Encoder that leaves HTML as it is
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		e.Encode(s)
		r := Record{B: []byte("x"), KeepHTML: true}
		r.String("", s)
		if string(r.B)+"\n" != "x"+enc.String() {
			t.Fatalf("%q: a Record keeping HTML wrote %s, the Encoder %s", s, r.B[1:], enc.String())
		}
	}
	floats := []float64{0, math.Copysign(0, -1), 1e-6, 9.999999999999999e-7, 1e21, 999999999999999900000, -1e-7, 5e-324,
		math.MaxFloat64, 0.1, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1)}
	for range 20000 {
		floats = append(floats, math.Float64frombits(r.Uint64()))
	}
	for _, f := range floats {
		want, wantErr := json.Marshal(f)
		r := Record{B: []byte("x")}
		r.Float("", f)
		if got, err := r.B, r.Err; (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || (err == nil && string(got) != "x"+string(want)) {
			t.Fatalf("%v: a Record wrote %s (%v), Marshal %s (%v)", f, got, err, want, wantErr)
		}
	}
}
