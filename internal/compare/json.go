package compare

import (
	"strconv"

	"github.com/semianalysis/opx/internal/jsontext"
)

// The cases of a comparison are written as json.Marshal writes a Case, field by field
// (internal/jsontext): WriteJSON writes a case for every key of both runs (128,000 of
// them, 109 MB, at the largest sweep). TestAppendCaseIsMarshal holds these functions to
// json.Marshal, byte for byte, error for error.

// appendCase appends c as json.Marshal writes it.
func appendCase(dst []byte, c *Case) ([]byte, error) {
	dst = append(dst, `{"key":`...)
	dst = jsontext.AppendString(dst, c.Key)
	dst = appendField(dst, `,"testlist":`, c.Testlist)
	dst = appendField(dst, `,"op_type":`, c.OpType)
	dst = appendField(dst, `,"args":`, c.Args)
	dst = appendField(dst, `,"backend":`, c.Backend)
	dst = appendField(dst, `,"cluster":`, c.Cluster)
	dst = strconv.AppendInt(append(dst, `,"world_size":`...), int64(c.WorldSize), 10)
	if c.BaseStatus != "" {
		dst = appendField(dst, `,"base_status":`, c.BaseStatus)
	}
	if c.NewStatus != "" {
		dst = appendField(dst, `,"new_status":`, c.NewStatus)
	}
	if c.NewMessage != "" {
		dst = appendField(dst, `,"new_message":`, c.NewMessage)
	}
	dst = appendField(dst, `,"class":`, c.Class)
	var err error
	if c.Primary != nil {
		if dst, err = appendMetric(append(dst, `,"primary":`...), c.Primary); err != nil {
			return dst, err
		}
	}
	if len(c.Metrics) > 0 {
		dst = append(dst, `,"metrics":[`...)
		for i := range c.Metrics {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendMetric(dst, &c.Metrics[i]); err != nil {
				return dst, err
			}
		}
		dst = append(dst, ']')
	}
	if p := c.PctOfRoofline; p != nil {
		dst = append(dst, `,"pct_of_roofline":{`...)
		sep := ""
		for _, f := range []struct {
			name string
			v    float64
		}{{`"base":`, p.Base}, {`"new":`, p.New}} {
			if f.v != 0 {
				if dst, err = jsontext.AppendFloat(append(append(dst, sep...), f.name...), f.v); err != nil {
					return dst, err
				}
				sep = ","
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// appendMetric appends m as json.Marshal writes it.
func appendMetric(dst []byte, m *Metric) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = jsontext.AppendString(dst, m.Name)
	dst = appendField(dst, `,"direction":`, m.Direction)
	var err error
	for _, f := range []struct {
		name string
		v    float64
	}{{`,"base":`, m.Base}, {`,"new":`, m.New}, {`,"ratio":`, m.Ratio}, {`,"speedup":`, m.Speedup}} {
		if dst, err = jsontext.AppendFloat(append(dst, f.name...), f.v); err != nil {
			return dst, err
		}
	}
	dst = appendField(dst, `,"change":`, m.Change)
	dst = appendField(dst, `,"class":`, m.Class)
	dst = appendField(dst, `,"noise":`, m.Noise)
	for _, f := range []struct {
		name string
		v    float64
	}{{`,"base_lo":`, m.BaseLo}, {`,"base_hi":`, m.BaseHi}, {`,"new_lo":`, m.NewLo}, {`,"new_hi":`, m.NewHi}} {
		if f.v != 0 { // omitempty
			if dst, err = jsontext.AppendFloat(append(dst, f.name...), f.v); err != nil {
				return dst, err
			}
		}
	}
	return append(dst, '}'), nil
}

func appendField(dst []byte, name, s string) []byte {
	return jsontext.AppendString(append(dst, name...), s)
}
