package testenv

import (
	"os"
	"strings"
	"testing"
)

// RunBlocks returns the workflow's `run: |` scripts by step name.
func RunBlocks(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	blocks := map[string]string{}
	name := ""
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if n, ok := strings.CutPrefix(strings.TrimPrefix(l, "- "), "name: "); ok {
			name = n
		}
		if l != "run: |" {
			if strings.Contains(l, "run:") && !strings.HasPrefix(l, "#") {
				t.Fatalf("%s:%d: write run steps as `run: |` blocks (this test reads only those)", path, i+1)
			}
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		var body []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			body = append(body, strings.TrimPrefix(next, strings.Repeat(" ", indent+2)))
			i++
		}
		if _, dup := blocks[name]; dup {
			name += " (again)"
		}
		blocks[name] = strings.Join(body, "\n")
	}
	return blocks
}
