package compare

import "github.com/semianalysis/opx/internal/jsontext"

// The cases of a comparison are written as json.Marshal writes a Case, field by field
// (internal/jsontext): WriteJSON writes a case for every key of both runs (128,000 of
// them, 109 MB, at the largest sweep). TestAppendCaseIsMarshal holds these functions to
// json.Marshal, byte for byte, error for error.

// appendCase appends c as json.Marshal writes it.
func appendCase(dst []byte, c *Case) ([]byte, error) {
	w := jsontext.Record{B: dst}
	w.String(`{"key":`, c.Key)
	w.String(`,"testlist":`, c.Testlist)
	w.String(`,"op_type":`, c.OpType)
	w.String(`,"args":`, c.Args)
	w.String(`,"backend":`, c.Backend)
	w.String(`,"cluster":`, c.Cluster)
	w.Int(`,"world_size":`, c.WorldSize)
	if c.BaseStatus != "" {
		w.String(`,"base_status":`, c.BaseStatus)
	}
	if c.NewStatus != "" {
		w.String(`,"new_status":`, c.NewStatus)
	}
	if c.NewMessage != "" {
		w.String(`,"new_message":`, c.NewMessage)
	}
	w.String(`,"class":`, c.Class)
	if c.Primary != nil {
		w.Raw(`,"primary":`)
		writeMetric(&w, c.Primary)
	}
	if len(c.Metrics) > 0 {
		w.Raw(`,"metrics":[`)
		for i := range c.Metrics {
			if i > 0 {
				w.Raw(",")
			}
			writeMetric(&w, &c.Metrics[i])
		}
		w.Raw("]")
	}
	if p := c.PctOfRoofline; p != nil {
		w.Raw(`,"pct_of_roofline":{`)
		if p.Base != 0 { // omitempty
			w.Float(`"base":`, p.Base)
		}
		switch {
		case p.New != 0 && p.Base != 0:
			w.Float(`,"new":`, p.New)
		case p.New != 0:
			w.Float(`"new":`, p.New)
		}
		w.Raw("}")
	}
	if len(c.Contended) > 0 {
		w.Raw(`,"contended":[`)
		for i, side := range c.Contended {
			if i > 0 {
				w.Raw(",")
			}
			w.String("", side)
		}
		w.Raw("]")
	}
	w.Raw("}")
	return w.B, w.Err
}

// writeMetric writes m as json.Marshal writes it.
func writeMetric(w *jsontext.Record, m *Metric) {
	w.String(`{"name":`, m.Name)
	w.String(`,"direction":`, m.Direction)
	w.Float(`,"base":`, m.Base)
	w.Float(`,"new":`, m.New)
	w.Float(`,"ratio":`, m.Ratio)
	w.Float(`,"speedup":`, m.Speedup)
	w.String(`,"change":`, m.Change)
	w.String(`,"class":`, m.Class)
	w.String(`,"noise":`, m.Noise)
	for _, f := range [...]struct { // omitempty
		name string
		v    float64
	}{{`,"base_lo":`, m.BaseLo}, {`,"base_hi":`, m.BaseHi}, {`,"new_lo":`, m.NewLo}, {`,"new_hi":`, m.NewHi}} {
		if f.v != 0 {
			w.Float(f.name, f.v)
		}
	}
	w.Raw("}")
}
