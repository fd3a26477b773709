package catalog

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/semianalysis/opx/internal/pyjson"
)

func TestEmbeddedCatalogLoads(t *testing.T) {
	tls := NewTestlists("")
	names := tls.Names()
	if !strings.Contains(strings.Join(names, ","), "cpu_smoke") || len(names) < 8 {
		t.Fatalf("embedded testlists: %v", names)
	}
	for _, n := range names {
		if _, err := tls.Load(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	c, err := LoadContainers(Embedded("containers.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c["nvidia"]["vllm"].Digest == "" || c["amd"]["torch"].Image == "" {
		t.Fatalf("containers: %+v", c)
	}
}

func TestDiskSourceNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(p, []byte("[1,"), 0o644)
	_, err := Disk(p).ReadJSON()
	if err == nil || !strings.HasPrefix(err.Error(), p+": invalid JSON at line 1 column 4") {
		t.Fatal(err)
	}
}

// FuzzTestlist: any bytes give shapes or a one-line error, never a panic.
func FuzzTestlist(f *testing.F) {
	f.Add([]byte(`[{"type": "gemm", "args": {"m": 1, "parallel": {"tp": 2}}, "sources": []}]`))
	f.Add([]byte(`[{"type": 1}]`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tl := Testlists{dir: fstest.MapFS{"x.json": {Data: data}}, loc: "fuzz"}
		_, err := tl.Load("x")
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error: %q", err)
		}
	})
}

// FuzzContainers: containers.toml parsing never panics and errors are one line.
func FuzzContainers(f *testing.F) {
	f.Add([]byte("[nvidia.vllm]\nimage = \"v:1\"\ndigest = \"sha256:" + strings.Repeat("a", 64) + "\"\n"))
	f.Add([]byte("[amd]\ntorch = 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := LoadContainers(Source{FS: fstest.MapFS{"c.toml": {Data: data}}, Path: "c.toml", Name: "c.toml"})
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error: %q", err)
		}
	})
}

// A testlist on disk parses as the embedded copy does; a directory, a FIFO or a device
// in its place is a one-line error naming it (and never blocks).
func TestTestlistOnDisk(t *testing.T) {
	dir := t.TempDir()
	data, err := fs.ReadFile(Data, "testlists/gemm_legacy.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := NewTestlists(dir).Load("big")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewTestlists("").Load("gemm_legacy")
	if !bytes.Equal(pyjson.MustMarshal(got, pyjson.Default), pyjson.MustMarshal(want, pyjson.Default)) {
		t.Fatal("the testlist on disk parses differently")
	}
	if err := os.Mkdir(filepath.Join(dir, "d.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "f.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(dir, "z.json"))
	for _, n := range []string{"d", "f", "z"} {
		if _, err := NewTestlists(dir).Load(n); err == nil || strings.Count(err.Error(), n+".json") != 1 || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s.json: %v", n, err)
		}
	}
}
