package summary

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
)

// ResultsFile is a results file as the harness writes it (docs/compat-spec.md §10), decoded
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
	Args              Args // op.args (WholeRows); none when it is not an object
	// ArgsKey is op.args as the case key has them, json.dumps(args, sort_keys=True)
	// ("{}" when the row has no args object); "" for OnlyStatuses.
	ArgsKey string
	Metrics Metrics // nil when not an object
}

// Decode is how much of each row ReadResults decodes; whatever it leaves is checked all
// the same.
type Decode int

const (
	OnlyStatuses Decode = iota // each row's status
	KeyedRows                  // and its op, metrics and args' key, not its args
	WholeRows                  // and its args
)

// ReadResults reads a results file, checked as the seed checks it: an object with a
// "rows" list of objects, each with a status (which Results also holds to ok,
// unsupported or error), each row decoded as far as what says. A document that is not
// JSON is that error, wherever its first row that is not an object lies.
func ReadResults(ctx context.Context, path string, what Decode) (*ResultsFile, error) {
	f := &ResultsFile{}
	if err := readResults(ctx, path, what, f); err != nil {
		return nil, err
	}
	return f, nil
}

// readResults is ReadResults into f, whose rows' room is used again.
func readResults(ctx context.Context, path string, what Decode, f *ResultsFile) error {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	b, err := files.ReadRegularInto(ctx, path, files.MaxInput, *buf)
	if err != nil {
		return err
	}
	*buf = b
	if err := decodeResults(b, what, f); err != nil { // nothing it leaves in f holds b
		var syntaxErr *pyjson.SyntaxError
		if errors.As(err, &syntaxErr) {
			return fmt.Errorf("%s: not a results file: %w", path, syntaxErr)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// resultsFiles are Results' files, each handed to one callback at a time.
var resultsFiles = sync.Pool{New: func() any { return new(ResultsFile) }}

// buffers are the read buffers of results files, one per reader at a time: a file is
// decoded into values of their own and its bytes read over by the next.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// decodeResults decodes a document; what makes it no results file (with the document
// itself valid JSON) is returned only once the whole document has been read.
func decodeResults(b []byte, what Decode, f *ResultsFile) error {
	clear(f.Rows) // another file's: nothing of it is held
	*f = ResultsFile{Rows: f.Rows[:0]}
	d, err := pyjson.NewDecoder(b)
	if err != nil {
		return err
	}
	var notResults error // what makes it no results file, valid JSON though it is
	hasRows := false
	if d.Kind() != '{' {
		if err := d.Skip(); err != nil {
			return err
		}
		notResults = errors.New("not a results file: a results file is a JSON object")
	} else {
		var rowsErr error // of the last "rows": a repeated key keeps its last value
		scratch := rowScratch{doc: b}
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
					r, has, err := decodeRow(d, what, &scratch)
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
			return err
		}
		if !hasRows {
			notResults = errors.New(`results file has no "rows" list`)
		} else {
			notResults = rowsErr
		}
	}
	if err := d.End(); err != nil {
		return err
	}
	if notResults != nil {
		return notResults
	}
	return nil
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

// decodeRow decodes one row as far as what says, and whether it has a status.
func decodeRow(d *pyjson.Decoder, what Decode, scratch *rowScratch) (ResultRow, bool, error) {
	var r ResultRow
	has, full := false, what > OnlyStatuses
	if full {
		r.ArgsKey = "{}"
	}
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
			r.OpType, r.Backend, r.Args = "", "", Args{}
			if full {
				r.ArgsKey = "{}"
			}
			if full && d.Kind() == '{' {
				err = d.Object(func(key []byte) error {
					var err error
					switch string(key) {
					case "type":
						r.OpType, _, err = d.Text()
					case "backend":
						r.Backend, _, err = d.Text()
					case "args":
						r.Args, r.ArgsKey = Args{}, "{}"
						if d.Kind() == '{' {
							r.Args, r.ArgsKey, err = decodeArgs(d, what, scratch)
						}
					}
					return err
				})
			}
		case "metrics":
			r.Metrics = nil
			if full && d.Kind() == '{' {
				r.Metrics, err = decodeMetrics(d, scratch.doc, &scratch.names)
			}
		}
		return err
	})
	return r, has, err
}

// rowScratch is the room a file's rows are decoded in, used again from row to row.
type rowScratch struct {
	doc   []byte // the document
	key   []byte // a row's args key, written before it is copied
	args  argsBuilder
	names []string // the metric names seen, one string each
}

// decodeArgs is a row's args object: (WholeRows) the args and their key text, read in one
// pass; (KeyedRows) the key text only.
func decodeArgs(d *pyjson.Decoder, what Decode, scratch *rowScratch) (Args, string, error) {
	if what == KeyedRows {
		b, err := d.Canonical(scratch.key[:0])
		scratch.key = b
		return Args{}, string(b), err
	}
	a, err := scratch.args.read(d, scratch.doc)
	return a, a.Text(), err
}
