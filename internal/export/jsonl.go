package export

import (
	"bytes"
	"encoding/json"
	"slices"

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
	w := jsontext.Record{B: dst, KeepHTML: true}
	w.String(`{"key":`, rec.Key)
	w.String(`,"shard":`, rec.Shard)
	w.Int(`,"attempt":`, rec.Attempt)
	w.String(`,"run_id":`, rec.RunID)
	w.String(`,"source_sha":`, rec.SourceSHA)
	if rec.StartedAt != "" {
		w.String(`,"started_at":`, rec.StartedAt)
	}
	if rec.Host != "" {
		w.String(`,"host":`, rec.Host)
	}
	w.String(`,"testlist":`, rec.Testlist)
	w.String(`,"op_type":`, rec.OpType)
	w.Raw(`,"args":`)
	w.B = appendArgs(w.B, argsJSON)
	w.String(`,"args_label":`, rec.ArgsLabel)
	w.String(`,"backend":`, rec.Backend)
	w.String(`,"cluster":`, rec.Cluster)
	w.String(`,"runner":`, rec.Runner)
	w.Int(`,"world_size":`, rec.WorldSize)
	w.String(`,"status":`, rec.Status)
	if rec.Message != "" {
		w.String(`,"message":`, rec.Message)
	}
	w.Int(`,"tries":`, rec.Tries)
	w.Float(`,"gpu_seconds":`, rec.GPUSecs)
	if rec.Throttled != "" {
		w.String(`,"throttled":`, rec.Throttled)
	}
	if rec.Contended != "" {
		w.String(`,"contended":`, rec.Contended)
	}
	if rec.Metrics == nil {
		w.Raw(`,"metrics":null`)
	} else {
		var room [16]string
		names := room[:0]
		for name := range rec.Metrics {
			names = append(names, name)
		}
		slices.Sort(names) // encoding/json writes a map's keys in order
		w.Raw(`,"metrics":{`)
		for i, name := range names {
			if i > 0 {
				w.Raw(",")
			}
			w.String("", name)
			w.Float(":", rec.Metrics[name])
		}
		w.Raw("}")
	}
	if s := rec.SOL; s != nil {
		w.Float(`,"sol":{"achieved_tbps":`, s.AchievedTBPS)
		w.Float(`,"achieved_tflops":`, s.AchievedTFLOPS)
		if s.Bound != "" {
			w.String(`,"bound":`, s.Bound)
		}
		w.Float(`,"bytes":`, s.Bytes)
		w.Float(`,"flops":`, s.FLOPs)
		if s.FormulaDiff != nil {
			w.Float(`,"formula_diff_pct":`, *s.FormulaDiff)
		}
		w.Bool(`,"impossible":`, s.Impossible)
		w.Float(`,"intensity":`, s.Intensity)
		w.Float(`,"pct_of_bandwidth_peak":`, s.PctBandwidth)
		w.Float(`,"pct_of_compute_peak":`, s.PctCompute)
		w.Float(`,"pct_of_roofline":`, s.PctRoofline)
		if s.Source != "" {
			w.String(`,"work_source":`, s.Source)
		}
		w.Raw("}")
	}
	w.Raw("}")
	return w.B, true, w.Err
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
	if in || !json.Valid(dst[start:]) { // a text that is no JSON ({m: 1}) is written as a string
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
