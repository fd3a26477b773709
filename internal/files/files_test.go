package files

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// A large file is written whole and replaces the old one with nothing left over.
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

// An output path that is not a regular file (a FIFO here; /dev/null alike) is refused and
// left as it was: the rename would replace it.
func TestWriteAtomicRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	for _, p := range []string{fifo, dir} {
		if err := WriteAtomic(p, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}
}
