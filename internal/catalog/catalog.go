// Package catalog owns opx's embedded inputs (testlists, platform overlay, containers.toml) and
// the loaders that read them, or the files that replace them.
//
// It owns opx's embedded inputs — the testlists, the platform overlay keyed by
// runner label with its CollectiveX base registry, and containers.toml — and the loaders that
// read them, or their on-disk replacements, with one-line errors that name file and place.
package catalog

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/semianalysis/opx/internal/suggest"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/pyjson"
	"github.com/semianalysis/opx/internal/safe"
)

//go:embed data
var embedded embed.FS

// Data is the embedded catalog, rooted so that it holds platforms.json,
// platform_config.json, containers.toml and testlists/.
var Data = mustSub(embedded, "data")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Source is where an input file comes from: the embedded catalog or the file system.
type Source struct {
	FS   fs.FS  // the file system to read from
	Path string // path within FS
	Name string // how to name the file in messages: printable, quoted when the path is not

	disk string // the path as given, for files on disk (Sibling resolves against it)
}

// Embedded names a file of the embedded catalog.
func Embedded(path string) Source {
	return Source{FS: Data, Path: path, Name: "embedded " + safe.Text(path)}
}

// Disk names a file on disk.
func Disk(path string) Source {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return Source{FS: os.DirFS(filepath.Dir(abs)), Path: filepath.Base(abs), Name: safe.Text(path), disk: path}
}

// Read returns the file's bytes, with an error naming it.
func (s Source) Read() ([]byte, error) {
	var b []byte
	var err error
	if s.disk != "" {
		// outside input: a regular file of bounded size, never a FIFO or a device
		b, err = files.ReadRegular(context.Background(), s.disk, files.MaxInput)
	} else {
		b, err = fs.ReadFile(s.FS, s.Path)
	}
	if err != nil {
		var pe *fs.PathError
		if errorsAs(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return b, nil
}

// ReadJSON reads and parses the file with Python's JSON rules.
func (s Source) ReadJSON() (pyjson.Value, error) {
	b, err := s.Read()
	if err != nil {
		return nil, err
	}
	v, err := pyjson.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return v, nil
}

// Sibling names a file relative to this one's directory (for "base" references).
func (s Source) Sibling(rel string) Source {
	if s.disk == "" { // the embedded catalog or another fs.FS (tests): the sibling is in the same one
		p := pathJoin(pathDir(s.Path), rel)
		if s.FS == Data {
			return Embedded(p)
		}
		return Source{FS: s.FS, Path: p, Name: safe.Text(p)}
	}
	if filepath.IsAbs(rel) { // as Python's Path / "/abs" gives "/abs"
		return Disk(rel)
	}
	dir := filepath.Dir(s.disk)
	return Disk(filepath.Join(dir, rel))
}

func pathDir(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return "."
}

func pathJoin(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return dir + "/" + rel
}

// ValidTestlistName is the seed's allow-list for testlist names, [A-Za-z0-9_-]+; it also
// blocks path traversal. (A loop, not a regexp: it keeps opx's start-up short.)
func ValidTestlistName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Testlists reads testlists from a directory (the embedded one when dir is empty).
type Testlists struct {
	dir  fs.FS
	disk string // the directory, when on disk
	loc  string // for messages
}

// NewTestlists returns the testlist directory dir, or the embedded catalog when dir is "".
func NewTestlists(dir string) Testlists {
	if dir == "" {
		return Testlists{dir: mustSub(Data, "testlists"), loc: "embedded testlists"}
	}
	return Testlists{dir: os.DirFS(dir), disk: dir, loc: dir}
}

// Names lists the available testlists, sorted.
func (t Testlists) Names() []string {
	entries, _ := fs.ReadDir(t.dir, ".")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() && ValidTestlistName(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Load reads one testlist and checks its shape: a JSON array of objects, each with a
// "type" string and an "args" object.
func (t Testlists) Load(name string) ([]pyjson.Value, error) {
	if !ValidTestlistName(name) {
		return nil, fmt.Errorf("invalid testlist name")
	}
	src := Source{FS: t.dir, Path: name + ".json", Name: safe.Text(filepath.Join(t.loc, name+".json"))}
	var b []byte
	var err error
	if t.disk != "" {
		b, err = files.ReadRegular(context.Background(), filepath.Join(t.disk, name+".json"), files.MaxInput)
	} else {
		b, err = fs.ReadFile(t.dir, name+".json")
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			hint := ""
			if best := suggest.Closest(name, t.Names()); best != "" {
				hint = "; did you mean " + best + "?"
			}
			return nil, fmt.Errorf("unknown testlist %q in %s; available: %s%s", name, t.loc, strings.Join(t.Names(), ", "), hint)
		}
		var pe *fs.PathError
		if errorsAs(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", src.Name, err)
	}
	v, err := pyjson.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Name, err)
	}
	shapes, ok := v.([]pyjson.Value)
	if !ok {
		return nil, fmt.Errorf("%s: a testlist is a JSON array of shapes, found %s", src.Name, pyjson.TypeName(v))
	}
	for i, s := range shapes {
		o, ok := s.(*pyjson.Object)
		if !ok {
			return nil, fmt.Errorf("%s: shape [%d] is %s, not an object", src.Name, i, pyjson.TypeName(s))
		}
		if typ, ok := o.Get("type"); !ok {
			return nil, fmt.Errorf("%s: shape [%d] has no \"type\"", src.Name, i)
		} else if _, ok := typ.(string); !ok {
			return nil, fmt.Errorf("%s: shape [%d] \"type\" is %s, not a string", src.Name, i, pyjson.TypeName(typ))
		}
		args, ok := o.Get("args")
		if !ok {
			return nil, fmt.Errorf("%s: shape [%d] has no \"args\"", src.Name, i)
		}
		if _, ok := args.(*pyjson.Object); !ok {
			return nil, fmt.Errorf("%s: shape [%d] \"args\" is %s, not an object", src.Name, i, pyjson.TypeName(args))
		}
	}
	return shapes, nil
}

// Summary is a testlist as `opx list testlists` shows it: how many shapes it has and its
// op types, sorted.
func (t Testlists) Summary(name string) (shapes int, opTypes []string, err error) {
	all, err := t.Load(name)
	if err != nil {
		return 0, nil, err
	}
	types := map[string]bool{}
	for _, s := range all {
		typ, _ := s.(*pyjson.Object).String("type") // Load checked it
		types[typ] = true
	}
	return len(all), slices.Sorted(maps.Keys(types)), nil
}

// Image is one backend's entry of containers.toml.
type Image struct {
	Image  string `toml:"image"`
	Digest string `toml:"digest"`
}

// Containers is containers.toml: vendor -> backend -> image.
type Containers map[string]map[string]Image

// LoadContainers parses containers.toml.
func LoadContainers(src Source) (Containers, error) {
	b, err := src.Read()
	if err != nil {
		return nil, err
	}
	return ParseContainers(src, b)
}

// ParseContainers parses containers.toml's bytes b, read from src (its name in messages):
// a file as a commit held it (opx plan --affected-by).
func ParseContainers(src Source, b []byte) (Containers, error) {
	var raw map[string]map[string]Image
	if err := toml.Unmarshal(b, &raw); err != nil {
		var de *toml.DecodeError
		if errorsAs(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s: line %d column %d: %s", src.Name, row, col, oneLine(de.Error()))
		}
		var se *toml.StrictMissingError
		if errorsAs(err, &se) {
			return nil, fmt.Errorf("%s: %s", src.Name, oneLine(se.Error()))
		}
		return nil, fmt.Errorf("%s: %s", src.Name, oneLine(err.Error()))
	}
	for vendor, backends := range raw {
		for backend, img := range backends {
			if img.Image == "" {
				return nil, fmt.Errorf("%s: [%s.%s] has no image", src.Name, vendor, backend)
			}
			if img.Digest != "" && !validDigest(img.Digest) {
				return nil, fmt.Errorf("%s: [%s.%s] digest %q is not sha256:<64 hex>", src.Name, vendor, backend, img.Digest)
			}
		}
	}
	return raw, nil
}

func validDigest(d string) bool {
	if len(d) != 71 || !strings.HasPrefix(d, "sha256:") {
		return false
	}
	for _, c := range d[7:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
