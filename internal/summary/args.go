package summary

import (
	"bytes"
	"errors"
	"iter"
	"strconv"
	"strings"

	"github.com/semianalysis/opx/internal/pyjson"
)

// Args is a row's op.args as the readers use them: the text the case key has
// (json.dumps(args, sort_keys=True)), the label (the args flattened in their order,
// "m=128 n=128 k=128 a=fp32 out=fp32", a nested object of one "dtype" shown as its
// dtype), and every member typed for the roofline's formulas (sol.Args) and the report.
// A results file's rows are read into it in one pass over the args' text, with no tree;
// the zero Args is no args at all.
type Args struct {
	s           string    // the key's text, the label, then the members' keys and strings
	text, label uint32    // where the key's text and the label end in s
	nodes       []argNode // every member at every depth, in the document's order; their text lies after the label
}

// argNode is one member of the args or of an object in them.
type argNode struct {
	parent   int32 // the object member it is in; -1 at the top
	kind     byte
	key, val span // in Args.s after the label: its key, and a string's value
	num      float64
}

type span struct{ lo, hi uint32 }

// A member's kind.
const (
	argOther  byte = iota // null, a list
	argNumber             // num
	argString             // val
	argTrue
	argFalse
	argObject // its members follow it, with it as their parent
)

// Text is the args as the case key has them: json.dumps(args, sort_keys=True).
func (a *Args) Text() string { return a.s[:a.text] }

// Label is the args flattened in their order: "m=128 n=128 k=128 a=fp32 out=fp32".
func (a *Args) Label() string { return a.s[a.text:a.label] }

func (a *Args) str(s span) string { return a.s[a.label+s.lo : a.label+s.hi] }

// member is the member key of the object at parent (-1: the args themselves), and its index.
func (a *Args) member(parent int32, key string) (*argNode, int32) {
	for i := range a.nodes {
		if n := &a.nodes[i]; n.parent == parent && a.str(n.key) == key {
			return n, int32(i)
		}
	}
	return nil, -1
}

// Number is the member key when it is a number (an integer as its nearest float).
func (a *Args) Number(key string) (float64, bool) {
	n, _ := a.member(-1, key)
	if n == nil || n.kind != argNumber {
		return 0, false
	}
	return n.num, true
}

// String is the member key when it is a string.
func (a *Args) String(key string) (string, bool) {
	n, _ := a.member(-1, key)
	if n == nil || n.kind != argString {
		return "", false
	}
	return a.str(n.val), true
}

// Bool is the member key when it is true or false.
func (a *Args) Bool(key string) (b, ok bool) {
	n, _ := a.member(-1, key)
	if n == nil || (n.kind != argTrue && n.kind != argFalse) {
		return false, false
	}
	return n.kind == argTrue, true
}

// StringIn is args[key][sub] when args[key] is an object and its member sub a string.
func (a *Args) StringIn(key, sub string) (string, bool) {
	o, at := a.member(-1, key)
	if o == nil || o.kind != argObject {
		return "", false
	}
	n, _ := a.member(at, sub)
	if n == nil || n.kind != argString {
		return "", false
	}
	return a.str(n.val), true
}

// Numbers are the members at the top that are numbers, in their order.
func (a *Args) Numbers() iter.Seq2[string, float64] {
	return func(yield func(string, float64) bool) {
		for i := range a.nodes {
			if n := &a.nodes[i]; n.parent == -1 && n.kind == argNumber && !yield(a.str(n.key), n.num) {
				return
			}
		}
	}
}

// ParseArgs reads the text of an args object (as a document writes it, or as the case
// key has it).
func ParseArgs(text []byte) (Args, error) {
	var d pyjson.Decoder
	if err := d.Reset(text); err != nil {
		return Args{}, err
	}
	if d.Kind() != '{' {
		return Args{}, errors.New("args are not an object")
	}
	var b argsBuilder
	a, err := b.read(&d, text)
	if err == nil {
		err = d.End()
	}
	return a, err
}

// argsBuilder makes Args, its room used again from one to the next.
type argsBuilder struct {
	label  []byte
	strs   []byte // the members' keys, and their values' text: a string's own, a number as the key writes it
	prefix []byte // the label's prefix for an object's members: "a.scale."
	nodes  []argNode
	room   []argNode // where done places each Args' nodes: one allocation for many rows'
	key    []byte    // the key's text
	// slow is whether the one pass leaves the args to the tree: a list (labelled as
	// JSON) or a repeated key (Python keeps the last value in the first one's place)
	slow bool
}

func (b *argsBuilder) reset() {
	b.label, b.strs, b.prefix, b.nodes, b.key, b.slow = b.label[:0], b.strs[:0], b.prefix[:0], b.nodes[:0], b.key[:0], false
}

// read is the Args of the args object at d, in doc (the document d reads), checked.
func (b *argsBuilder) read(d *pyjson.Decoder, doc []byte) (Args, error) {
	b.reset()
	start := d.Offset()
	if err := b.object(d, -1); err != nil {
		return Args{}, err
	}
	if !b.slow {
		b.key = b.canonical(b.key[:0], -1) // which finds a repeated key
	}
	if b.slow {
		raw := bytes.TrimRight(doc[start:d.Offset()], " \t\r\n")
		v, err := pyjson.Parse(raw)
		if err != nil {
			return Args{}, err
		}
		key, err := pyjson.Marshal(v, pyjson.Identity)
		if err != nil {
			return Args{}, err
		}
		b.reset()
		b.tree(-1, v.(*pyjson.Object))
		return b.done(key), nil
	}
	return b.done(b.key), nil
}

// done is the Args with its key's text.
func (b *argsBuilder) done(text []byte) Args {
	var s strings.Builder
	s.Grow(len(text) + len(b.label) + len(b.strs))
	s.Write(text)
	s.Write(b.label)
	s.Write(b.strs)
	a := Args{s: s.String(), text: uint32(len(text)), label: uint32(len(text) + len(b.label))}
	if n := len(b.nodes); n > 0 { // a part of room of its own (a full slice: no append reaches past it)
		if cap(b.room)-len(b.room) < n { // twice the last room, up to nodeRoom: a builder used once makes just enough
			b.room = make([]argNode, 0, max(min(2*cap(b.room), nodeRoom), n))
		}
		at := len(b.room)
		b.room = append(b.room, b.nodes...)
		a.nodes = b.room[at:len(b.room):len(b.room)]
	}
	return a
}

// nodeRoom is how many nodes room is made for: a results file's rows, a few hundred,
// each with about eight.
const nodeRoom = 2048

// keep appends text to the members' text and returns where it lies.
func (b *argsBuilder) keep(text []byte) span {
	lo := len(b.strs)
	b.strs = append(b.strs, text...)
	return span{uint32(lo), uint32(len(b.strs))}
}

func (b *argsBuilder) kept(s span) []byte { return b.strs[s.lo:s.hi] }

// leaf adds "prefix+key=value" to the label.
func (b *argsBuilder) leaf(key, value []byte) {
	if len(b.label) > 0 {
		b.label = append(b.label, ' ')
	}
	b.label = append(append(append(append(b.label, b.prefix...), key...), '='), value...)
}

// object reads the object at d, its members under parent.
func (b *argsBuilder) object(d *pyjson.Decoder, parent int32) error {
	return d.Object(func(key []byte) error {
		n := argNode{parent: parent, key: b.keep(key)}
		at := len(b.nodes)
		switch d.Kind() {
		case '{':
			n.kind = argObject
			b.nodes = append(b.nodes, n)
			mark, plen := len(b.label), len(b.prefix)
			b.prefix = append(append(b.prefix, key...), '.')
			err := b.object(d, int32(at))
			b.prefix = b.prefix[:plen]
			if err != nil {
				return err
			}
			if len(b.nodes) == at+2 && b.nodes[at+1].kind == argString && string(b.kept(b.nodes[at+1].key)) == "dtype" {
				b.label = b.label[:mark] // an object of one dtype is shown as its dtype
				b.leaf(key, b.kept(b.nodes[at+1].val))
			}
			return nil
		case '[':
			b.slow = true
			return d.Skip()
		case '"':
			lo := len(b.strs)
			var err error
			if b.strs, _, err = d.AppendText(b.strs); err != nil {
				return err
			}
			n.kind, n.val = argString, span{uint32(lo), uint32(len(b.strs))}
			b.nodes = append(b.nodes, n)
			b.leaf(key, b.kept(n.val))
			return nil
		}
		text, _, err := d.Literal()
		if err != nil {
			return err
		}
		switch text[0] {
		case 'n':
			n.kind = argOther
		case 't':
			n.kind = argTrue
		case 'f':
			n.kind = argFalse
		default:
			n.kind = argNumber
		}
		lo := len(b.strs)
		b.strs, _ = pyjson.AppendLiteral(b.strs, text) // checked by Literal: as the key writes it
		n.val = span{uint32(lo), uint32(len(b.strs))}
		if n.kind == argNumber {
			// its nearest float (an integer's too; NaN, Infinity and -Infinity as such)
			n.num, _ = strconv.ParseFloat(string(b.kept(n.val)), 64)
		}
		b.nodes = append(b.nodes, n)
		b.leaf(key, b.kept(n.val))
		return nil
	})
}

// canonical appends the members of the object at (-1: the args) as json.dumps(args,
// sort_keys=True) writes them, from their text kept (pyjson writes each key, string and
// number); the args have no list, and a repeated key found here is the tree's.
func (b *argsBuilder) canonical(dst []byte, at int32) []byte {
	var room [16]int32
	kids := room[:0]
	for i := int(at) + 1; i < len(b.nodes) && b.nodes[i].parent >= at; i++ {
		if b.nodes[i].parent == at {
			kids = append(kids, int32(i))
		}
	}
	for i := 1; i < len(kids); i++ { // a few: put in order in place
		for j := i; j > 0; j-- {
			c := bytes.Compare(b.kept(b.nodes[kids[j]].key), b.kept(b.nodes[kids[j-1]].key))
			b.slow = b.slow || c == 0 // a repeated key: the tree's (Python keeps the last value in the first one's place)
			if c >= 0 {
				break
			}
			kids[j], kids[j-1] = kids[j-1], kids[j]
		}
	}
	dst = append(dst, '{')
	for i, k := range kids {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		n := &b.nodes[k]
		dst = append(pyjson.AppendQuoted(dst, b.kept(n.key)), ": "...)
		switch n.kind {
		case argObject:
			dst = b.canonical(dst, k)
		case argString:
			dst = pyjson.AppendQuoted(dst, b.kept(n.val))
		case argTrue:
			dst = append(dst, "true"...)
		case argFalse:
			dst = append(dst, "false"...)
		case argOther:
			dst = append(dst, "null"...)
		default:
			dst = append(dst, b.kept(n.val)...)
		}
	}
	return append(dst, '}')
}

// tree adds an object's members, built already, under parent.
func (b *argsBuilder) tree(parent int32, o *pyjson.Object) {
	for _, m := range o.Members() {
		n := argNode{parent: parent, key: b.keep([]byte(m.Key))}
		var value string
		switch x := m.Value.(type) {
		case *pyjson.Object:
			n.kind = argObject
			at := int32(len(b.nodes))
			b.nodes = append(b.nodes, n)
			d, isDtype := x.String("dtype")
			if !isDtype || x.Len() != 1 {
				plen := len(b.prefix)
				b.prefix = append(append(b.prefix, m.Key...), '.')
				b.tree(at, x)
				b.prefix = b.prefix[:plen]
				continue
			}
			// an object of one dtype is shown as its dtype
			b.nodes = append(b.nodes, argNode{parent: at, kind: argString, key: b.keep([]byte("dtype")), val: b.keep([]byte(d))})
			b.leaf([]byte(m.Key), []byte(d))
			continue
		case string:
			n.kind, n.val, value = argString, b.keep([]byte(x)), x
		case pyjson.Int, float64:
			n.kind, value = argNumber, pyjson.Scalar(x)
			n.num, _ = o.Number(m.Key)
		case bool:
			n.kind, value = argFalse, pyjson.Scalar(x)
			if x {
				n.kind = argTrue
			}
		default: // null, a list
			value = pyjson.Scalar(x)
		}
		b.nodes = append(b.nodes, n)
		b.leaf([]byte(m.Key), []byte(value))
	}
}
