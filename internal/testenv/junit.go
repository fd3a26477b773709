package testenv

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// JUnitReport is a JUnit XML file as the tests read it back.
type JUnitReport struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Skipped  int `xml:"skipped,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Out string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ValidJUnit validates path against testdata/junit/junit.xsd with xmllint (libxml2-utils,
// which scripts/test.sh installs) and returns it read. Without xmllint the test skips, and
// fails when OPX_REQUIRE_SLURM says the whole suite must run.
func ValidJUnit(t testing.TB, path string) JUnitReport {
	t.Helper()
	if _, err := exec.LookPath("xmllint"); err != nil {
		if os.Getenv("OPX_REQUIRE_SLURM") != "" {
			t.Fatal("xmllint is missing (scripts/test.sh installs libxml2-utils)")
		}
		t.Skip("xmllint is missing (scripts/test.sh installs libxml2-utils)")
	}
	_, here, _, _ := runtime.Caller(0)
	schema := filepath.Join(filepath.Dir(here), "..", "..", "testdata", "junit", "junit.xsd")
	if out, err := exec.Command("xmllint", "--noout", "--schema", schema, path).CombinedOutput(); err != nil {
		b, _ := os.ReadFile(path)
		t.Fatalf("%s is not valid JUnit XML: %v\n%s\n%s", path, err, out, b)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r JUnitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
