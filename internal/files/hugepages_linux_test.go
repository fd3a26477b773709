package files

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A large file is read into memory Linux was asked to back with huge pages (the mapping
// holding the buffer carries the "hg" flag in /proc/self/smaps); a small one is not.
func TestLargeReadsAskForHugePages(t *testing.T) {
	for _, size := range []int{hugeRead, 64 << 10} {
		p := filepath.Join(t.TempDir(), "f")
		want := strings.Repeat("x", size)
		if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		f, fi, err := OpenRegular(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadOpenedInto(context.Background(), f, fi, MaxInput, nil)
		f.Close()
		if err != nil || string(b) != want {
			t.Fatalf("%d bytes: read %d, %v", size, len(b), err)
		}
		addr, _ := strconv.ParseUint(strings.TrimPrefix(fmt.Sprintf("%p", &b[len(b)/2]), "0x"), 16, 64)
		if got, want := advised(t, addr), size >= hugeRead; got != want {
			t.Errorf("%d bytes: huge pages asked %v, want %v", size, got, want)
		}
	}
}

// advised is whether the mapping holding addr was advised MADV_HUGEPAGE.
func advised(t *testing.T, addr uint64) bool {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(line, ":") && !strings.HasPrefix(line, "VmFlags") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			z, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && a <= addr && addr < z
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(" "+line+" ", " hg ")
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return false
}
