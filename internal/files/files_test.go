package files

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A large file is written whole, behind a writer that starts its writeback chunk by
// chunk, and replaces the old one with nothing left over.
func TestWriteAtomicLarge(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "manifest.json")
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7)
	for round := range 2 {
		data[0] = byte('a' + round)
		if err := WriteAtomic(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: content differs (%v)", round, err)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	if names := listDir(t, filepath.Dir(path)); len(names) != 1 {
		t.Fatalf("left in the directory: %v", names)
	}
}

// The write-behind writer hands every byte to writeback, in chunks, once finished.
func TestWriteBehindCoversTheFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &writeBehind{f: f}
	piece := bytes.Repeat([]byte{'x'}, 100<<10)
	for range 15 {
		if _, err := w.Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	if w.ranges == nil || w.sent == 0 || w.sent >= w.written {
		t.Fatalf("after 1.5 MB: sent %d of %d", w.sent, w.written)
	}
	w.finish()
	if w.sent != w.written || w.written != 15*100<<10 {
		t.Fatalf("finished: sent %d of %d", w.sent, w.written)
	}
	small := &writeBehind{f: f}
	small.Write([]byte("tiny"))
	small.finish()
	if small.ranges != nil {
		t.Fatal("a small file started writeback")
	}
}

// A writer that fails part-way leaves the old file as it was and no temporary file.
func TestWriteAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := WriteAtomicFunc(path, 0o644, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte{'n'}, 1<<20))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Fatalf("old file changed: %q", got)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("left in the directory: %v", names)
	}
}
