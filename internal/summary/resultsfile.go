package summary

import (
	"context"
	"errors"
	"fmt"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
)

// ResultsFile is a results file as the harness writes it (docs/seed-spec.md §10), decoded
// straight into its rows: the one reader of that format.
type ResultsFile struct {
	Run  ResultsRun
	Rows []ResultRow
}

// ResultsRun is a results file's "run": who measured it.
type ResultsRun struct {
	ID       string
	HasID    bool // "id" is a string
	Hostname string
	Version  string          // operatorx_version
	Software []pyjson.Member // "software", in order (nil when not an object)
}

// ResultRow is one row. Strings the harness wrote as something else are "".
type ResultRow struct {
	Status            string // str() of the value, as the seed's message shows it
	Message, Testlist string
	OpType, Backend   string
	Args              *pyjson.Object // op.args; nil when it is not an object
	Metrics           *pyjson.Object // nil when not an object
}

// ReadResults reads a results file, checked as the seed checks it: an object with a
// "rows" list of objects, each with a status (which Results also holds to ok,
// unsupported or error). Only the statuses are decoded when full is false: each row's op
// and metrics are checked, not built. A document that is not JSON is that error, wherever
// its first row that is not an object lies.
func ReadResults(ctx context.Context, path string, full bool) (*ResultsFile, error) {
	b, err := files.ReadRegular(ctx, path, files.MaxInput)
	if err != nil {
		return nil, err
	}
	f, err := decodeResults(b, full)
	if err != nil {
		var se *pyjson.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: not a results file: %v", path, se)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return f, nil
}

// decodeResults decodes a document; what makes it no results file (with the document
// itself valid JSON) is returned only once the whole document has been read.
func decodeResults(b []byte, full bool) (*ResultsFile, error) {
	d, err := pyjson.NewDecoder(b)
	if err != nil {
		return nil, err
	}
	f := &ResultsFile{}
	var notResults error // what makes it no results file, valid JSON though it is
	hasRows := false
	if d.Kind() != '{' {
		if err := d.Skip(); err != nil {
			return nil, err
		}
		notResults = errors.New("not a results file: a results file is a JSON object")
	} else {
		var rowsErr error // of the last "rows": a repeated key keeps its last value
		err = d.Object(func(key []byte) error {
			switch string(key) {
			case "run":
				f.Run = ResultsRun{}
				if d.Kind() == '{' {
					return d.Object(func(key []byte) error { return f.Run.member(d, key) })
				}
			case "rows":
				f.Rows, rowsErr, hasRows = f.Rows[:0], nil, d.Kind() == '['
				if !hasRows {
					return nil
				}
				return d.Array(func(i int) error {
					if d.Kind() != '{' {
						v, err := d.Value()
						if err == nil && rowsErr == nil {
							rowsErr = fmt.Errorf("not a results file: rows[%d] is %s, not an object", i, pyjson.TypeName(v))
						}
						return err
					}
					r, has, err := decodeRow(d, full)
					if err == nil && !has && rowsErr == nil {
						rowsErr = fmt.Errorf("not a results file: rows[%d] has no \"status\"", i)
					}
					f.Rows = append(f.Rows, r)
					return err
				})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !hasRows {
			notResults = errors.New(`results file has no "rows" list`)
		} else {
			notResults = rowsErr
		}
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	if notResults != nil {
		return nil, notResults
	}
	return f, nil
}

// member takes one member of "run".
func (r *ResultsRun) member(d *pyjson.Decoder, key []byte) error {
	var err error
	switch string(key) {
	case "id":
		r.ID, r.HasID, err = d.Text()
	case "hostname":
		r.Hostname, _, err = d.Text()
	case "operatorx_version":
		r.Version, _, err = d.Text()
	case "software":
		r.Software = nil
		if d.Kind() == '{' {
			var v pyjson.Value
			if v, err = d.Value(); err == nil {
				r.Software = v.(*pyjson.Object).Members()
			}
		}
	}
	return err
}

// decodeRow decodes one row (its status only unless full), and whether it has a status.
func decodeRow(d *pyjson.Decoder, full bool) (ResultRow, bool, error) {
	var r ResultRow
	has := false
	err := d.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "status":
			has = true
			if d.Kind() == '"' {
				r.Status, _, err = d.Text()
			} else { // shown as the seed's message shows it, then refused by Results
				var v pyjson.Value
				v, err = d.Value()
				r.Status = pyStr(v)
			}
		case "message":
			if full {
				r.Message, _, err = d.Text()
			}
		case "testlist":
			if full {
				r.Testlist, _, err = d.Text()
			}
		case "op":
			r.OpType, r.Backend, r.Args = "", "", nil
			if full && d.Kind() == '{' {
				err = d.Object(func(key []byte) error {
					var err error
					switch string(key) {
					case "type":
						r.OpType, _, err = d.Text()
					case "backend":
						r.Backend, _, err = d.Text()
					case "args":
						r.Args = nil
						if d.Kind() == '{' {
							var v pyjson.Value
							if v, err = d.Value(); err == nil {
								r.Args = v.(*pyjson.Object)
							}
						}
					}
					return err
				})
			}
		case "metrics":
			r.Metrics = nil
			if full && d.Kind() == '{' {
				var v pyjson.Value
				if v, err = d.Value(); err == nil {
					r.Metrics = v.(*pyjson.Object)
				}
			}
		}
		return err
	})
	return r, has, err
}
