// Package pyjson owns opx's Python-compatible JSON: an ordered value model, a strict parser and
// an encoder that writes what Python's json.dumps writes.
//
// It owns opx's Python-compatible JSON: an ordered value model that keeps
// object key order and the difference between 1 and 1.0, a strict parser, and an encoder
// that reproduces the byte output of Python's json.dumps in the modes the seed uses
// (docs/compat-spec.md §3.1, §17). Shard ids hash this output, so it must match the seed exactly.
//
// Values are: nil (null), bool, string, Int, float64, *Object and []Value.
// Strings are WTF-8: a lone surrogate that came from a \uD800-style escape is kept as its
// three-byte encoding so that it re-encodes exactly as Python would.
package pyjson

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/pytext"
)

// Value is any JSON value of this package's model.
type Value = any

// Int is a JSON integer kept as its canonical decimal text (Python ints have no size limit).
type Int string

// NewInt returns the Int for n.
func NewInt(n int64) Int { return Int(strconv.FormatInt(n, 10)) }

// Int64 returns the value when it fits in an int64.
func (i Int) Int64() (int64, bool) {
	n, err := strconv.ParseInt(string(i), 10, 64)
	return n, err == nil
}

// Big returns the value as a big.Int.
func (i Int) Big() *big.Int {
	b, _ := new(big.Int).SetString(string(i), 10)
	if b == nil {
		b = new(big.Int)
	}
	return b
}

// Member is one key/value pair of an Object.
type Member struct {
	Key   string
	Value Value
}

// Object is a JSON object that keeps insertion order, like a Python dict.
type Object struct {
	members []Member
	index   map[string]int // key → position, built once the object outgrows a linear scan
}

// indexAt is the size from which lookups go through a map; below it a scan is as quick.
const indexAt = 16

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

func (o *Object) find(key string) (int, bool) {
	if o.index != nil {
		i, ok := o.index[key]
		return i, ok
	}
	for i := range o.members {
		if o.members[i].Key == key {
			return i, true
		}
	}
	return 0, false
}

// Obj builds an object from alternating keys and values: Obj("a", 1, "b", "x").
// Go ints are converted to Int.
func Obj(kv ...any) *Object {
	o := &Object{members: make([]Member, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		o.Set(kv[i].(string), From(kv[i+1]))
	}
	return o
}

// From converts common Go values (int, int64, []string) into the value model.
func From(v any) Value {
	switch x := v.(type) {
	case int:
		return NewInt(int64(x))
	case int64:
		return NewInt(x)
	case []string:
		out := make([]Value, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case map[string]string:
		panic("pyjson.From: maps have no order; build an Object")
	default:
		return v
	}
}

// Len is the number of members.
func (o *Object) Len() int { return len(o.members) }

// Members returns the members in order. The slice is the object's own: read it, do not
// change it (appending to it copies).
func (o *Object) Members() []Member { return slices.Clip(o.members) }

// Keys returns the keys in order.
func (o *Object) Keys() []string {
	keys := make([]string, len(o.members))
	for i, m := range o.members {
		keys[i] = m.Key
	}
	return keys
}

// Get returns the value for key.
func (o *Object) Get(key string) (Value, bool) {
	if o == nil {
		return nil, false
	}
	if i, ok := o.find(key); ok {
		return o.members[i].Value, true
	}
	return nil, false
}

// Has reports whether key is present.
func (o *Object) Has(key string) bool { _, ok := o.Get(key); return ok }

// Set adds key at the end, or replaces its value in place (Python dict semantics).
func (o *Object) Set(key string, v Value) {
	if i, ok := o.find(key); ok {
		o.members[i].Value = v
		return
	}
	o.members = append(o.members, Member{key, v})
	if o.index != nil {
		o.index[key] = len(o.members) - 1
	} else if len(o.members) >= indexAt {
		o.reindex()
	}
}

func (o *Object) reindex() {
	o.index = nil
	if len(o.members) < indexAt {
		return
	}
	o.index = make(map[string]int, len(o.members))
	for i, m := range o.members {
		o.index[m.Key] = i
	}
}

// Delete removes key, keeping the order of the rest.
func (o *Object) Delete(key string) {
	if i, ok := o.find(key); ok {
		o.members = slices.Delete(o.members, i, i+1)
		o.reindex()
	}
}

// Clone returns a shallow copy of o.
func (o *Object) Clone() *Object {
	c := &Object{members: slices.Clone(o.members)}
	c.reindex()
	return c
}

// String returns the member as a string if it is one.
func (o *Object) String(key string) (string, bool) {
	v, ok := o.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// Number returns the member as a float64 if it is a number (an Int as its nearest float).
func (o *Object) Number(key string) (float64, bool) {
	v, _ := o.Get(key)
	switch x := v.(type) {
	case Int:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil || math.IsInf(f, 0)
	case float64:
		return x, true
	}
	return 0, false
}

// Bool returns the member as a bool if it is true or false.
func (o *Object) Bool(key string) (b, ok bool) {
	v, _ := o.Get(key)
	b, ok = v.(bool)
	return b, ok
}

// StringIn returns o[key][sub] if o[key] is an object and its member sub a string.
func (o *Object) StringIn(key, sub string) (string, bool) {
	in, ok := o.Object(key)
	if !ok {
		return "", false
	}
	return in.String(sub)
}

// Object returns the member as an object if it is one.
func (o *Object) Object(key string) (*Object, bool) {
	v, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	x, ok := v.(*Object)
	return x, ok
}

// Array returns the member as an array if it is one.
func (o *Object) Array(key string) ([]Value, bool) {
	v, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	x, ok := v.([]Value)
	return x, ok
}

// Truthy follows Python's truth rules for JSON values.
func Truthy(v Value) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case Int:
		return x != "0"
	case float64:
		return x != 0
	case *Object:
		return x != nil && x.Len() > 0
	case []Value:
		return len(x) > 0
	}
	return true
}

// TypeName names the JSON type of v for error messages.
func TypeName(v Value) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case Int:
		return "integer"
	case float64:
		return "number"
	case *Object:
		return "object"
	case []Value:
		return "array"
	case Raw:
		return "unread JSON"
	}
	return fmt.Sprintf("%T", v)
}

// ParseInt parses like Python's int(): surrounding whitespace, a sign and "_" between digits.
func ParseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	body := strings.TrimLeft(t, "+-")
	ok := len(t)-len(body) <= 1 && body != "" && body[0] != '_' && body[len(body)-1] != '_' && !strings.Contains(body, "__")
	if ok {
		if n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("invalid literal for int() with base 10: %s", pytext.Repr(s))
}

// Scalar is a value as text, for a message or a label: a string as itself, null, true and
// false, an integer as written, a float as Python writes it; an object or a list as
// compact JSON.
func Scalar(v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case Int:
		return string(x)
	case float64:
		return FloatRepr(x)
	}
	b, err := Marshal(v, Default)
	if err != nil {
		return "?"
	}
	return string(b)
}
