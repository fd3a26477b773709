// Package junit writes JUnit XML for CI test reporters: a suite of testcases, failures for
// regressions, written atomically.
//
// It writes JUnit XML, the report CI test reporters read (GitHub's
// dorny/test-reporter and mikepenz/action-junit-report among them): `opx compare --junit`
// and `opx history check --junit` write one testcase per case or change, a failure for
// each regression the gate fails on. The shape is the common one those readers share —
// <testsuites> of <testsuite name tests failures errors skipped> of <testcase classname
// name time> with at most one <failure message type>, <error> or <skipped message> and a
// <system-out> — and testdata/junit.xsd states it; the file is written atomically.
package junit

import (
	"encoding/xml"
	"io"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/safe"
)

// Suites is a report: one suite a command writes.
type Suites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     string   `xml:"time,attr"`
	Suites   []Suite  `xml:"testsuite"`
}

// Suite is one command's cases.
type Suite struct {
	Name      string `xml:"name,attr"`
	Tests     int    `xml:"tests,attr"`
	Failures  int    `xml:"failures,attr"`
	Errors    int    `xml:"errors,attr"`
	Skipped   int    `xml:"skipped,attr"`
	Time      string `xml:"time,attr"`
	Timestamp string `xml:"timestamp,attr,omitempty"`
	Cases     []Case `xml:"testcase"`
}

// Case is one testcase: a failure, an error, skipped, or (none of them) passed.
type Case struct {
	Classname string   `xml:"classname,attr"`
	Name      string   `xml:"name,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Problem `xml:"failure,omitempty"`
	Error     *Problem `xml:"error,omitempty"`
	Skipped   *Problem `xml:"skipped,omitempty"`
	Out       string   `xml:"system-out,omitempty"`
}

// Problem is a failure, error or skip: its one-line message, its kind and its detail.
type Problem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// Write writes the suite, counted, to path atomically (files.WriteAtomicFunc: never over
// what is not a regular file). Text from runs (case names, messages) is made valid XML
// character data: control characters are escaped as safe.Text escapes them.
func Write(path, name string, s Suite, at time.Time) error {
	s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), 0, 0, 0
	for i := range s.Cases {
		c := &s.Cases[i]
		c.Classname, c.Name, c.Out = clean(c.Classname), clean(c.Name), clean(c.Out)
		if c.Time == "" {
			c.Time = "0"
		}
		for _, p := range []*Problem{c.Failure, c.Error, c.Skipped} {
			if p != nil {
				p.Message, p.Type, p.Text = clean(p.Message), clean(p.Type), clean(p.Text)
			}
		}
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
	if s.Time == "" {
		s.Time = "0"
	}
	if !at.IsZero() {
		s.Timestamp = at.UTC().Format("2006-01-02T15:04:05")
	}
	doc := Suites{Name: name, Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Skipped: s.Skipped, Time: s.Time, Suites: []Suite{s}}
	return files.WriteAtomicFunc(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, xml.Header); err != nil {
			return err
		}
		enc := xml.NewEncoder(w)
		enc.Indent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\n")
		return err
	})
}

// clean is outside text as a report shows it: each line's control and format characters
// and invalid bytes escaped (safe.Text); what XML 1.0 cannot hold besides, encoding/xml
// writes as U+FFFD.
func clean(s string) string {
	if !strings.Contains(s, "\n") {
		return safe.Text(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = safe.Text(l)
	}
	return strings.Join(lines, "\n")
}
