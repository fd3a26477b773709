package summary

import (
	"bytes"
	"math"
	"strconv"

	"github.com/semianalysis/opx/internal/pyjson"
)

// Metrics is a row's metrics object, typed as it is read: its members in the document's
// order, each a number, a list (its numbers kept) or another value (kept for a message).
// A name written twice keeps its first place and its last value, as Python's dict does.
type Metrics []Metric

// Metric is one member of a row's metrics.
type Metric struct {
	Name  string
	Kind  MetricKind
	Value float64   // MetricInt and MetricFloat: the number (an integer beyond a float's range is ±Inf)
	List  []float64 // MetricList: its items that are numbers (Number's rule), in order
	// text is what Text cannot make of Kind and Value: an integer's digits when a float
	// does not write them back, a string, null, true or false as pyjson.Scalar writes it,
	// a list's or an object's JSON as written
	text string
}

// MetricKind is what a metric's value was written as.
type MetricKind uint8

const (
	MetricInt    MetricKind = iota // an integer
	MetricFloat                    // a float, NaN, Infinity or -Infinity
	MetricList                     // a list
	MetricText                     // a string, null, true or false
	MetricObject                   // an object
)

// Number is the metric's value when it is a measurement's number: an integer a float
// holds, or a finite float.
func (m *Metric) Number() (float64, bool) {
	return m.Value, m.Kind <= MetricFloat && !math.IsNaN(m.Value) && !math.IsInf(m.Value, 0)
}

// Text is the value as a message shows it, as pyjson.Scalar writes the value Parse makes
// of it: a string as itself, null, true and false, an integer as written (-0 as 0), a
// float as Python writes it, a list or an object as compact JSON.
func (m *Metric) Text() string {
	switch m.Kind {
	case MetricInt:
		if m.text != "" {
			return m.text
		}
		return strconv.FormatFloat(m.Value, 'f', -1, 64)
	case MetricFloat:
		return pyjson.FloatRepr(m.Value)
	case MetricText:
		return m.text
	}
	v, err := pyjson.Parse([]byte(m.text))
	if err != nil { // it was read as JSON
		return m.text
	}
	return pyjson.Scalar(v)
}

// literal is a number's or a literal's metric, from its text as Decoder.Literal gives it.
func literal(text []byte) Metric {
	f, digits, ok := pyjson.Number(text)
	switch {
	case !ok: // null, true, false
		return Metric{Kind: MetricText, text: string(text)}
	case digits == nil:
		return Metric{Kind: MetricFloat, Value: f}
	}
	m := Metric{Kind: MetricInt, Value: f}
	var room [32]byte
	if string(strconv.AppendFloat(room[:0], f, 'f', -1, 64)) != string(digits) {
		m.text = string(digits)
	}
	return m
}

// decodeMetrics is the metrics object the decoder is at (in doc), its names shared from
// names (one string a name in a file).
func decodeMetrics(d *pyjson.Decoder, doc []byte, names *[]string) (Metrics, error) {
	ms := Metrics{}
	err := d.Object(func(key []byte) error {
		m, err := decodeMetric(d, doc)
		if err != nil {
			return err
		}
		for i := range ms {
			if ms[i].Name == string(key) { // written twice: its first place, its last value
				m.Name = ms[i].Name
				ms[i] = m
				return nil
			}
		}
		m.Name = name(key, names)
		if cap(ms) == 0 { // room for the names the file's rows have had: a row mostly has them all
			ms = make(Metrics, 0, max(len(*names), 2))
		}
		ms = append(ms, m)
		return nil
	})
	return ms, err
}

// decodeMetric is the value the decoder is at (in doc), as a metric without its name.
func decodeMetric(d *pyjson.Decoder, doc []byte) (Metric, error) {
	switch d.Kind() {
	case 0:
		text, _, err := d.Literal()
		if err != nil {
			return Metric{}, err
		}
		return literal(text), nil
	case '"':
		s, _, err := d.Text()
		return Metric{Kind: MetricText, text: s}, err
	}
	m := Metric{Kind: MetricObject}
	start := d.Offset()
	var err error
	if d.Kind() == '[' {
		m.Kind = MetricList
		err = d.Array(func(int) error {
			text, ok, err := d.Literal()
			if ok {
				item := literal(text)
				if f, ok := item.Number(); ok {
					m.List = append(m.List, f)
				}
			}
			return err
		})
	} else {
		err = d.Skip()
	}
	m.text = string(bytes.TrimRight(doc[start:d.Offset()], " \t\r\n"))
	return m, err
}

// name is key as a string, the same string for the same name in a file's rows.
func name(key []byte, names *[]string) string {
	for _, s := range *names {
		if s == string(key) {
			return s
		}
	}
	s := string(key)
	if len(*names) < 64 {
		*names = append(*names, s)
	}
	return s
}
