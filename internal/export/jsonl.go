package export

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/semianalysis/opx/internal/jsontext"
	"github.com/semianalysis/opx/internal/results"
)

// appendRecord appends rec's JSON line (without its line break) as writeJSONL's Encoder
// writes it (HTML left as it is; its args as results.EncodeWithArgs gives them, the
// row's key text argsJSON), field by field (internal/jsontext): an export has a line for
// each of a run's cases, 128,000 at the largest sweep. A record with counters is left to
// encoding/json (ok false). TestAppendRecordIsEncoder holds it to the Encoder.
func appendRecord(dst []byte, rec *jsonRecord, argsJSON string) (_ []byte, ok bool, err error) {
	if rec.Counters != nil {
		return dst, false, nil
	}
	str := jsontext.AppendStringNoHTMLEscape
	dst = str(append(dst, `{"key":`...), rec.Key)
	dst = str(append(dst, `,"shard":`...), rec.Shard)
	dst = strconv.AppendInt(append(dst, `,"attempt":`...), int64(rec.Attempt), 10)
	dst = str(append(dst, `,"testlist":`...), rec.Testlist)
	dst = str(append(dst, `,"op_type":`...), rec.OpType)
	dst = appendArgs(append(dst, `,"args":`...), argsJSON)
	dst = str(append(dst, `,"args_label":`...), rec.ArgsLabel)
	dst = str(append(dst, `,"backend":`...), rec.Backend)
	dst = str(append(dst, `,"cluster":`...), rec.Cluster)
	dst = str(append(dst, `,"runner":`...), rec.Runner)
	dst = strconv.AppendInt(append(dst, `,"world_size":`...), int64(rec.WorldSize), 10)
	dst = str(append(dst, `,"status":`...), rec.Status)
	if rec.Message != "" {
		dst = str(append(dst, `,"message":`...), rec.Message)
	}
	dst = strconv.AppendInt(append(dst, `,"tries":`...), int64(rec.Tries), 10)
	if dst, err = jsontext.AppendFloat(append(dst, `,"gpu_seconds":`...), rec.GPUSecs); err != nil {
		return dst, true, err
	}
	if rec.Throttled != "" {
		dst = str(append(dst, `,"throttled":`...), rec.Throttled)
	}
	dst = append(dst, `,"metrics":`...)
	if rec.Metrics == nil {
		dst = append(dst, "null"...)
	} else {
		var room [16]string
		names := room[:0]
		for name := range rec.Metrics {
			names = append(names, name)
		}
		slices.Sort(names) // encoding/json writes a map's keys in order
		dst = append(dst, '{')
		for i, name := range names {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(str(dst, name), ':')
			if dst, err = jsontext.AppendFloat(dst, rec.Metrics[name]); err != nil {
				return dst, true, err
			}
		}
		dst = append(dst, '}')
	}
	if s := rec.SOL; s != nil {
		dst = append(dst, `,"sol":{`...)
		for i, f := range []struct {
			name string
			v    float64
		}{{`"achieved_tbps":`, s.AchievedTBPS}, {`"achieved_tflops":`, s.AchievedTFLOPS}} {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = jsontext.AppendFloat(append(dst, f.name...), f.v); err != nil {
				return dst, true, err
			}
		}
		if s.Bound != "" {
			dst = str(append(dst, `,"bound":`...), s.Bound)
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{`,"bytes":`, s.Bytes}, {`,"flops":`, s.FLOPs}} {
			if dst, err = jsontext.AppendFloat(append(dst, f.name...), f.v); err != nil {
				return dst, true, err
			}
		}
		if s.FormulaDiff != nil {
			if dst, err = jsontext.AppendFloat(append(dst, `,"formula_diff_pct":`...), *s.FormulaDiff); err != nil {
				return dst, true, err
			}
		}
		dst = strconv.AppendBool(append(dst, `,"impossible":`...), s.Impossible)
		for _, f := range []struct {
			name string
			v    float64
		}{{`,"intensity":`, s.Intensity}, {`,"pct_of_bandwidth_peak":`, s.PctBandwidth}, {`,"pct_of_compute_peak":`, s.PctCompute},
			{`,"pct_of_roofline":`, s.PctRoofline}} {
			if dst, err = jsontext.AppendFloat(append(dst, f.name...), f.v); err != nil {
				return dst, true, err
			}
		}
		if s.Source != "" {
			dst = str(append(dst, `,"work_source":`...), s.Source)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), true, nil
}

// appendArgs appends a row's args text (its key's, json.dumps(args, sort_keys=True):
// printable ASCII, ", " and ": " between its tokens) as results.EncodeWithArgs writes it
// through writeJSONL's Encoder: compact, and args JSON has no word for (NaN, Infinity) as
// a string of their text (results.ArgsRaw). A text of another form is written by
// encoding/json itself; none at all is null.
func appendArgs(dst []byte, s string) []byte {
	if s == "" { // no text, as encoding/json writes an empty RawMessage
		return append(dst, "null"...)
	}
	start, in := len(dst), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c > 0x7e:
			return appendArgsAsEncoded(dst[:start], s)
		case in:
			switch c {
			case '\\':
				if i+1 == len(s) {
					return appendArgsAsEncoded(dst[:start], s)
				}
				dst = append(dst, c, s[i+1]) // an escape, as it stands
				i++
				continue
			case '"':
				in = false
			}
		case c == ' ':
			continue
		case c == '"':
			in = true
		case c == 'N' || c == 'I': // NaN, Infinity, -Infinity
			return appendArgsAsEncoded(dst[:start], s)
		}
		dst = append(dst, c)
	}
	if in {
		return appendArgsAsEncoded(dst[:start], s)
	}
	return dst
}

// appendArgsAsEncoded is appendArgs by encoding/json: the args compacted, or a string of
// their text.
func appendArgsAsEncoded(dst []byte, s string) []byte {
	var out bytes.Buffer
	json.Compact(&out, results.ArgsRaw(s)) // valid JSON either way
	return append(dst, out.Bytes()...)
}
