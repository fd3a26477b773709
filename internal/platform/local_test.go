package platform

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The local runner runs a backend but cpu only where python3 imports the OperatorX
// harness; plan and doctor both say so in these words.
func TestLocalBackends(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	empty := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + empty, "PYTHONNOUSERSITE=1"}
	if _, missing := LocalBackends(t.Context(), env); !strings.Contains(missing, "No module named 'operatorx'") {
		t.Errorf("without the harness: %q", missing)
	}
	withHarness := t.TempDir()
	os.MkdirAll(filepath.Join(withHarness, "operatorx"), 0o755)
	os.WriteFile(filepath.Join(withHarness, "operatorx", "__init__.py"), nil, 0o644)
	env[1] = "PYTHONPATH=" + withHarness
	if can, missing := LocalBackends(t.Context(), env); missing != "" || !strings.Contains(can, "vllm") {
		t.Errorf("with the harness: %q %q", can, missing)
	}
}
