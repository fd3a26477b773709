// Package pyjson owns opx's Python-compatible JSON: an ordered value model that keeps
// object key order and the difference between 1 and 1.0, a strict parser, and an encoder
// that reproduces the byte output of Python's json.dumps in the modes the seed uses
// (seed-spec §3.1, §17). Shard ids hash this output, so it must match the seed exactly.
//
// Values are: nil (null), bool, string, Int, float64, *Object and []Value.
// Strings are WTF-8: a lone surrogate that came from a \uD800-style escape is kept as its
// three-byte encoding so that it re-encodes exactly as Python would.
package pyjson

import (
	"fmt"
	"math/big"
	"strconv"
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
//
// Its keys are a keyList that objects with the same keys share (a testlist's thousands
// of shapes have a handful of key sequences), and its values a slice of its own: a
// member costs 16 bytes, not 32.
type Object struct {
	kl     *keyList
	values []Value
}

// keyList is a sequence of distinct keys. The list an object builds with Set is its own
// and grows in place; a shared one (parsed, Records, Clone) is copied on the first Set
// that adds a key. Keys are never changed or removed in place, so a list and a length
// name one sequence.
type keyList struct {
	keys  []string
	index map[string]int // built once the list outgrows a linear scan
	owner *Object        // the object that may append in place; nil when shared
	plain bool           // (shared lists) no key needs escaping: its quoted text is itself
}

// indexAt is the size from which lookups go through a map. Below it a scan is as quick
// and allocates nothing (a testlist's moe shapes have 12 args each).
const indexAt = 32

func (l *keyList) reindex() {
	l.index = nil
	if len(l.keys) < indexAt {
		return
	}
	l.index = make(map[string]int, len(l.keys))
	for i, k := range l.keys {
		l.index[k] = i
	}
}

// sharedKeys returns a shared list of keys (which must be distinct).
func sharedKeys(keys []string) *keyList {
	l := &keyList{keys: keys, plain: true}
	for _, k := range keys {
		for i := 0; i < len(k); i++ {
			if c := k[i]; c < 0x20 || c == '"' || c == '\\' {
				l.plain = false
			}
		}
	}
	l.reindex()
	return l
}

// seqSlot picks the slot of a direct-mapped cache of key sequences (the parser's and the
// encoder's) from a sequence's length and its first and last keys.
func seqSlot(n int, first, last string, slots int) int {
	h := n*31 + len(first)*7 + len(last)
	if first != "" {
		h += int(first[0])
	}
	return h % slots
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

func (o *Object) find(key string) (int, bool) {
	if o.kl == nil {
		return 0, false
	}
	if o.kl.index != nil {
		i, ok := o.kl.index[key]
		return i, ok && i < len(o.values)
	}
	for i, k := range o.kl.keys[:len(o.values)] {
		if k == key {
			return i, true
		}
	}
	return 0, false
}

// Obj builds an object from alternating keys and values: Obj("a", 1, "b", "x").
// Go ints are converted to Int.
func Obj(kv ...any) *Object {
	o := &Object{kl: &keyList{keys: make([]string, 0, len(kv)/2)}, values: make([]Value, 0, len(kv)/2)}
	o.kl.owner = o
	for i := 0; i+1 < len(kv); i += 2 {
		o.Set(kv[i].(string), From(kv[i+1]))
	}
	return o
}

// From converts common Go values (int, []string, map-free) into the value model.
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

// Records returns n objects (as values) with the same distinct keys, member j of object i
// holding value(i, j). They are allocated together and share their keys — a plan wraps
// thousands of shapes this way — and, like any object, may grow with Set.
func Records(keys []string, n int, value func(i, j int) Value) []Value {
	for i := range keys {
		for j := range i {
			if keys[i] == keys[j] {
				panic("pyjson.Records: repeated key " + keys[i])
			}
		}
	}
	k := len(keys)
	kl := sharedKeys(append([]string(nil), keys...))
	objs := make([]Object, n)
	values := make([]Value, n*k)
	out := make([]Value, n)
	for i := range objs {
		v := values[i*k : (i+1)*k : (i+1)*k]
		for j := range v {
			v[j] = value(i, j)
		}
		objs[i] = Object{kl: kl, values: v}
		out[i] = &objs[i]
	}
	return out
}

// Len is the number of members.
func (o *Object) Len() int { return len(o.values) }

// Members returns the members in order, in a new slice.
func (o *Object) Members() []Member {
	m := make([]Member, len(o.values))
	for i, v := range o.values {
		m[i] = Member{o.kl.keys[i], v}
	}
	return m
}

// Keys returns the keys in order.
func (o *Object) Keys() []string {
	if o.kl == nil {
		return []string{}
	}
	return append([]string{}, o.kl.keys[:len(o.values)]...)
}

// Get returns the value for key.
func (o *Object) Get(key string) (Value, bool) {
	if o == nil {
		return nil, false
	}
	i, ok := o.find(key)
	if !ok {
		return nil, false
	}
	return o.values[i], true
}

// Has reports whether key is present.
func (o *Object) Has(key string) bool { _, ok := o.Get(key); return ok }

// Set adds key at the end, or replaces its value in place (Python dict semantics).
func (o *Object) Set(key string, v Value) {
	if i, ok := o.find(key); ok {
		o.values[i] = v
		return
	}
	l := o.kl
	if l == nil || l.owner != o { // start a list of its own
		n := 0
		if l != nil {
			n = len(l.keys)
		}
		own := &keyList{keys: make([]string, n, n+4), owner: o}
		if l != nil {
			copy(own.keys, l.keys)
		}
		own.reindex()
		l, o.kl = own, own
	}
	l.keys = append(l.keys, key)
	o.values = append(o.values, v)
	if l.index != nil {
		l.index[key] = len(l.keys) - 1
	} else if len(l.keys) >= indexAt {
		l.reindex()
	}
}

// Delete removes key, keeping the order of the rest.
func (o *Object) Delete(key string) {
	i, ok := o.find(key)
	if !ok {
		return
	}
	keys := append(append(make([]string, 0, len(o.values)-1), o.kl.keys[:i]...), o.kl.keys[i+1:len(o.values)]...)
	o.values = append(append(make([]Value, 0, len(keys)), o.values[:i]...), o.values[i+1:]...)
	o.kl = &keyList{keys: keys, owner: o}
	o.kl.reindex()
}

// Clone returns a shallow copy of o.
func (o *Object) Clone() *Object {
	if o.kl != nil && o.kl.owner != nil {
		o.kl.owner = nil // shared from now on: whichever adds a key first copies it
	}
	return &Object{kl: o.kl, values: append([]Value(nil), o.values...)}
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
	}
	return fmt.Sprintf("%T", v)
}
