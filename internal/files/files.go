// Package files owns opx's file rules: atomic writes, regular files only, bounded reads, and which
// paths are trusted (outputs never inputs, no other user's directories).
//
// It owns opx's file writes: every file a user or a later step reads is written
// to a temporary file in the same directory and renamed into place, so a crash or a signal
// never leaves a half-written manifest, status or checkpoint (docs/compat-spec.md §3.1).
package files

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/pyjson"
)

// WriteAtomic writes data to path through a temporary file and a rename, creating the
// parent directories. A reader sees the old file or the new one, never a part, even when
// the writer is killed. (No fsync: this guards against crashed processes, as the seed's
// write_json does, not against power loss; fsync cost a planner run 60% of its time.)
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomicFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteJSON is the seed's write_json: indent=2 plus a newline, written atomically.
func WriteJSON(path string, v pyjson.Value) error {
	return WriteAtomicFunc(path, 0o644, func(w io.Writer) error {
		if err := pyjson.Encode(w, v, pyjson.File); err != nil {
			return err
		}
		_, err := w.Write([]byte("\n"))
		return err
	})
}

// WriteIndented writes v as indented JSON (encoding/json) plus a newline, atomically: the
// files opx adds beyond the seed's formats (accounting.json, fingerprints, run.json).
func WriteIndented(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteAtomic(path, append(b, '\n'), 0o644)
}

// errWriter remembers its writer's first error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// WriteAtomicFunc is WriteAtomic for content produced by write, which streams into the
// temporary file (buffered). An error of the file's writes is said with its path; an
// error of write's own (an input it could not read) as it is.
//
// An existing path that is not a regular file (a device such as /dev/null, a FIFO, a
// directory, or a link to one) is refused: the rename would replace it, and as root that
// replaces a device node.
func WriteAtomicFunc(path string, perm os.FileMode, write func(io.Writer) error) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: opx writes an output whole and renames it into place, which would replace it; give a file's path", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	ew := &errWriter{w: tmp}
	bw := bufio.NewWriterSize(ew, 64<<10)
	if err := write(bw); err != nil {
		if ew.err != nil { // the write failed (a full disk): say which file
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return err // the writer's own error (an input it could not read): said as it is
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// NotAnInput refuses an output path that would overwrite what the command reads: the
// run's manifest (the same file, through any link), or, inside one of the run directories
// it reads, a file the reader of a run opens — an execution.json, status.json,
// accounting.json, fingerprint-*.json or operatorx-manifest.json, or anything under a
// results/ directory — or one of opx run's records that other commands read: its case
// ledger cases.json (resume, --estimate-from) and run.json (history add). flag names the output in the message. It is checked before anything
// is read or written.
func NotAnInput(flag, out, manifest string, dirs ...string) error {
	if out == "" || out == "-" {
		return nil
	}
	o := resolved(out)
	if manifest != "" && Same(out, manifest) {
		return fmt.Errorf("%s %s is the run's manifest, an input: write elsewhere", flag, out)
	}
	for _, d := range dirs {
		rel, err := filepath.Rel(resolved(d), o)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		base := parts[len(parts)-1]
		read := slices.Contains(parts[:len(parts)-1], "results") ||
			slices.Contains([]string{"execution.json", "status.json", "accounting.json", "operatorx-manifest.json", "cases.json", "run.json"}, base) ||
			(strings.HasPrefix(base, "fingerprint-") && strings.HasSuffix(base, ".json"))
		if read {
			return fmt.Errorf("%s %s is a file of the run in %s, an input: write elsewhere", flag, out, d)
		}
	}
	return nil
}

// NotOneOf refuses an output path that is one of the files the command reads (the same
// file, through any link, or the same path once links are resolved): what names them in
// the message. It is checked before anything is read or written.
func NotOneOf(flag, out, what string, inputs ...string) error {
	if out == "" || out == "-" {
		return nil
	}
	for _, in := range inputs {
		if in != "" && Same(out, in) {
			return fmt.Errorf("%s %s is %s, an input: write elsewhere", flag, out, what)
		}
	}
	return nil
}

// Same is whether paths a and b name one file: the same path once links are resolved, or
// the same file.
func Same(a, b string) bool {
	if resolved(a) == resolved(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// RunDir is a run directory (or artifacts tree) named by the user, with the links in its
// path resolved: a run reached through a link (.opx-run/latest) is read as the directory
// it points to, by every command. Links inside the run are not followed (InRunLink).
func RunDir(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		if fi, err := os.Stat(r); err == nil && fi.IsDir() {
			return r
		}
	}
	return path
}

// InRunLink is the error for a symbolic link met inside a run's tree: never followed (it
// could make a run read any file), and said, never taken for a missing file.
func InRunLink(path string) error {
	return fmt.Errorf("%s: a symbolic link inside the run: opx never follows one (refused)", path)
}

// resolved is p absolute, with the links of what exists of it resolved: a link to the
// manifest is the manifest.
func resolved(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	dir, base := filepath.Split(a)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return a
}
