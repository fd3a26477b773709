package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Chromium finds Debian's headless browser; scripts/test.sh installs it and sets
// OPX_REQUIRE_CHROMIUM so a CI run cannot skip these tests silently.
func Chromium(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("OPX_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium not found and OPX_REQUIRE_CHROMIUM is set")
	}
	t.Skip("chromium not installed (scripts/test.sh installs it)")
	return ""
}

// OpenInChromium loads page (a file, or an http:// URL) in headless Chromium, returns the
// DOM after scripts ran and the console lines it logged, and leaves a screenshot at shot.
func OpenInChromium(t testing.TB, bin, page, shot string) (dom string, console []string) {
	t.Helper()
	// the page inflates its data asynchronously: the virtual-time budget lets its tasks
	// run to the end before the DOM is dumped or the screenshot taken
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--virtual-time-budget=10000"}
	run := func(extra ...string) (string, string) {
		target := page
		if !strings.Contains(page, "://") {
			target = "file://" + page
		}
		cmd := exec.Command(bin, append(append(append([]string(nil), base...), extra...), target)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
		}
		return out.String(), errb.String()
	}
	dom, log1 := run("--dump-dom")
	_, log2 := run("--screenshot="+shot, "--window-size=1280,3000")
	for _, l := range strings.Split(log1+"\n"+log2, "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	return dom, console
}
