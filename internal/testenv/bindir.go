package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BinDir is a PATH directory holding links to the named real commands and the given
// fake scripts.
func BinDir(t *testing.T, real []string, fakes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range real {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
