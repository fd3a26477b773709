package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
)

// LoadIndex reads a manifest for a reader that takes its cells one at a time (the run
// reader): every cell's facts as Load has them and how many cases it lists, and where its
// cases lie in the file, not the cases themselves. A 128,000-case manifest is tens of
// megabytes: it is read and checked once here, and let go, and each cell's cases are read
// again, alone, when their shard is read
// (Cell.ReadCases). The manifest and its errors are Load's; the cells' Raw has no cases,
// and the manifest no Raw.
//
// The file stays open until Close, and the cases are read from it: a manifest replaced
// by another file (planned again into the same path) while its run is read is still the
// one indexed.
func LoadIndex(ctx context.Context, path string) (*Manifest, error) {
	f, fi, err := files.OpenRegular(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("manifest %s: %w", path, fs.ErrNotExist)
		}
		return nil, err
	}
	b, err := files.ReadOpenedInto(ctx, f, fi, files.MaxInput, nil)
	if err != nil {
		f.Close()
		return nil, err
	}
	m, err := index(b, path, f)
	if err != nil {
		f.Close()
		var se *pyjson.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	m.file = f
	return m, nil
}

// Close releases the file of a manifest read with LoadIndex: its cells' cases can no
// longer be read. (Other manifests hold no file: Close does nothing.)
func (m *Manifest) Close() error {
	if m.file == nil {
		return nil
	}
	err := m.file.Close()
	m.file = nil
	return err
}

// casesAt is where a cell's cases list lies in its manifest file (open, and its path),
// and the checksum of those bytes as they were indexed.
type casesAt struct {
	file     *os.File
	path     string
	off, end int64
	sum      uint32
	// items are where each case lies within those bytes: its start, then its end
	items []uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// index reads the manifest b in one pass. What makes it no manifest is said only once the
// whole document is known to be JSON, as Load says it.
func index(b []byte, path string, file *os.File) (*Manifest, error) {
	d, err := pyjson.NewDecoder(b)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Path: path}
	hasRun, hasSHA, isList := false, false, false
	bad := -1 // the first include item that is no cell
	if d.Kind() != '{' {
		if err := d.Skip(); err != nil {
			return nil, err
		}
	} else {
		err = d.Object(func(key []byte) error {
			var err error
			switch string(key) {
			case "run_id":
				m.RunID, hasRun, err = d.Text()
			case "source_sha":
				m.SourceSHA, hasSHA, err = d.Text()
			case "include": // a repeated key: the last is the one
				m.Cells, isList, bad = nil, d.Kind() == '[', -1
				if !isList {
					return d.Skip()
				}
				return d.Array(func(i int) error {
					c, ok, err := indexCell(d, path, file, b)
					if !ok && bad < 0 {
						bad = i
					}
					m.Cells = append(m.Cells, c)
					return err
				})
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := d.End(); err != nil {
		return nil, err
	}
	if !hasRun || !hasSHA || !isList {
		return nil, fmt.Errorf("%s: a manifest needs string run_id and source_sha and an include list", path)
	}
	if bad >= 0 {
		return nil, fmt.Errorf("%s: include[%d] needs a string id and a cases list", path, bad)
	}
	return m, nil
}

// indexCell reads one include item: a cell (ok) when it is an object with a string id and
// a cases list.
func indexCell(d *pyjson.Decoder, path string, file *os.File, b []byte) (c *Cell, ok bool, err error) {
	if d.Kind() != '{' {
		return nil, false, d.Skip()
	}
	var at *casesAt
	n := 0
	o, err := decodeCellBut(d, func() error {
		if d.Kind() != '[' { // a repeated key: the last is the one
			at = nil
			return d.Skip()
		}
		at, n = &casesAt{file: file, path: path, off: int64(d.Offset())}, 0
		err := d.Array(func(int) error {
			n++
			start := d.Offset()
			err := d.Skip()
			end := len(bytes.TrimRight(b[:d.Offset()], " \t\n\r")) // Skip passes the whitespace after it
			// (a manifest is at most files.MaxInput bytes: an offset in it fits 32 bits)
			at.items = append(at.items, uint32(int64(start)-at.off), uint32(int64(end)-at.off))
			return err
		})
		at.end = int64(d.Offset())
		return err
	})
	if err != nil {
		return nil, false, err
	}
	_, hasID := o.String("id")
	if !hasID || at == nil {
		return nil, false, nil
	}
	at.sum = crc32.Checksum(b[at.off:at.end], castagnoli)
	c = DecodeCell(o)
	c.NumCases, c.casesAt = n, at
	return c, true, nil
}

// ReadCases is the cell's cases. A cell of LoadIndex reads them from its manifest file
// (until the manifest's Close) into buf (grown when it needs more room, and returned), each case its text there
// (Case.Text); the bytes must be those the index was made from. Any other cell has them.
func (c *Cell) ReadCases(ctx context.Context, buf []byte) ([]Case, []byte, error) {
	at := c.casesAt
	if at == nil {
		return c.Cases, buf, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, buf, context.Cause(ctx)
	}
	n := int(at.end - at.off)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := at.file.ReadAt(buf, at.off); errors.Is(err, os.ErrClosed) {
		return nil, buf, fmt.Errorf("%s: cell %s's cases read after the manifest was closed", at.path, c.ID)
	} else if err != nil {
		return nil, buf, fmt.Errorf("%s: changed while it was read (%w)", at.path, err)
	}
	if crc32.Checksum(buf, castagnoli) != at.sum {
		return nil, buf, fmt.Errorf("%s: changed while it was read (cell %s's cases are not the bytes read before)", at.path, c.ID)
	}
	cases := make([]Case, len(at.items)/2) // the same bytes: the cases where the index found them
	for i := range cases {
		cases[i].Text = pyjson.Raw(buf[at.items[2*i]:at.items[2*i+1]])
	}
	return cases, buf, nil
}
