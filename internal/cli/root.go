// Package cli owns opx's command line: each subcommand's flags, help and run function, and the
// mapping of errors to one line and an exit code.
//
// It owns opx's command line: one file per subcommand, each a constructor that
// declares its flags and a run function that does the work. Errors are printed once, here,
// as one line, and mapped to exit codes: 0 success, 1 an error, 2 a usage error, 128+n
// when ended by signal n (decisions §8).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/suggest"
	"github.com/semianalysis/opx/internal/version"
)

// Env is the process environment handed to the CLI, so tests can run it in-process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Environ        func() []string
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

func (e Env) environ() []string {
	if e.Environ == nil {
		return nil
	}
	return e.Environ()
}

// isTerminal reports whether w is a terminal (progress and colour only then).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// UsageError is a bad command line: exit 2.
type UsageError struct{ Err error }

// gatePercent checks a gate's threshold (--fail-on-regression PCT of compare and history
// check): a finite percentage above 0. NaN would make nothing a regression, and 0 or less
// every noise a regression.
func gatePercent(pct float64) error {
	if !(pct > 0) || math.IsInf(pct, 0) {
		return &UsageError{fmt.Errorf("--fail-on-regression %v: must be a finite percentage above 0 (5: 5%% slower)", pct)}
	}
	return nil
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// SignalError ends a command that was interrupted: exit 128+n.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string { return "interrupted by " + signalName(e.Signal) }

// signalName is a signal as users know it: SIGINT (Ctrl-C), SIGTERM, SIGHUP.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT (Ctrl-C)"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// ExitError carries an exit code chosen by a command (summarize's 1 on incomplete coverage)
// without printing anything more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode is the status opx exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// SignalContext is signal.NotifyContext that remembers which signal arrived, so commands
// can exit 128+n. The handlers are in place when it returns: from then on a signal cancels
// the context instead of killing the process, before any command has started.
//
// The first signal cancels the context: no new work starts, and what runs stops and
// cleans up (each shard cancels its allocation and confirms it gone, under
// proc.Cleanup). The second says it is stopping now and ends the cleanup too: an
// allocation not yet confirmed gone keeps its output directory and stage, as evidence for
// `opx finalize`. Later signals are answered the same way.
func SignalContext(parent context.Context, stderr io.Writer, sigs ...os.Signal) (context.Context, context.CancelFunc) {
	now, stopNow := context.WithCancelCause(parent)
	var words atomic.Pointer[string] // what the second signal says: the command's own words (proc.SetStopWords)
	ctx, cancel := context.WithCancelCause(proc.WithStopWords(proc.WithStopNow(now, now), &words))
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	stopped := make(chan struct{})
	cause := func(s os.Signal) error {
		if ss, ok := s.(syscall.Signal); ok {
			return &SignalError{ss}
		}
		return &SignalError{syscall.SIGINT}
	}
	go func() {
		select {
		case s := <-ch:
			cancel(cause(s))
		case <-stopped:
			return
		}
		for {
			select {
			case s := <-ch:
				msg := "opx: stopping now: cleanup cut short; a shard whose allocation is not yet confirmed gone keeps its output and stage (`opx finalize --output DIR` releases it later)"
				if w := words.Load(); w != nil {
					msg = *w
				}
				fmt.Fprintln(stderr, msg)
				stopNow(cause(s))
			case <-stopped:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(stopped)
			cancel(nil)
			stopNow(nil)
		})
	}
}

// Main runs opx with args and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	root := newRoot(ctx, env)
	started := false // a command's RunE began: an error before it is cobra's or pflag's usage error
	markRuns(root, &started)
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ex interface{ ExitCode() int } // an exit status chosen by the command (ExitError, rank.ExitError)
	if errors.As(err, &ex) {
		return ex.ExitCode()
	}
	var se *SignalError
	if errors.As(err, &se) || errors.As(context.Cause(ctx), &se) {
		if se != nil {
			fmt.Fprintf(env.Stderr, "opx: %s\n", oneLine(err.Error()))
			return 128 + int(se.Signal)
		}
	}
	var ue *UsageError
	if errors.As(err, &ue) || !started {
		fmt.Fprintf(env.Stderr, "opx: %s (see 'opx %s--help')\n", oneLine(err.Error()), commandName(root, args))
		return 2
	}
	fmt.Fprintf(env.Stderr, "opx: %s\n", oneLine(err.Error()))
	return 1
}

// oneLine is an error message as opx prints it: one line, with any control character an
// input smuggled into it (an escape sequence in a name or key) shown escaped.
func oneLine(s string) string { return safe.OneLine(s) }

func commandName(root *cobra.Command, args []string) string {
	c, _, err := root.Find(args)
	if err != nil || c == root {
		return ""
	}
	return strings.TrimPrefix(c.CommandPath(), "opx ") + " "
}

// markRuns wraps every command's RunE to record that it began. cobra reports a bad command
// line (an unknown command or flag, a missing required flag, the wrong number of
// arguments) before any RunE runs, with untyped errors: so an error returned before one
// began is a usage error, and no message text needs matching.
func markRuns(c *cobra.Command, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRuns(sub, started)
	}
}

const rootLong = `opx plans GPU operator benchmark sweeps (GEMM, MoE and attention kernels on the vLLM
and torch backends, or its own cpu backend) and runs them on Slurm GPU clusters under
pyxis/enroot, from GitHub Actions or a login node, then reports what was measured and
what is missing. Start with 'opx run' (a real sweep on this machine) and 'opx list'.

It re-implements InferenceX's OperatorX CI (a Python ci.py) in one static binary: the
same manifests, shard ids, file formats and messages, so its workflows keep working.

Exit codes:
  0    success
  1    an error (one line on stderr naming what is wrong and where)
  2    a usage error
  128+n  ended by signal n (130 SIGINT, 143 SIGTERM, 129 SIGHUP)
  summarize and run exit 1 when coverage is incomplete, doctor when something required is
  missing, compare --fail-on-regression when a case regressed, broke or went missing.`

func newRoot(ctx context.Context, env Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "opx",
		Short:         "Plan and run GPU operator benchmark sweeps on Slurm",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &UsageError{suggestFlag(c, err)} })
	cobra.EnableCommandSorting = false // the groups list their commands in the order a user needs them
	root.Version = version.String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddGroup(&cobra.Group{ID: "sweep", Title: "Sweeps:"},
		&cobra.Group{ID: "shard", Title: "One shard on a cluster (the workflow's per-shard steps):"},
		&cobra.Group{ID: "node", Title: "Run by opx itself on the compute node:"})
	group := func(id string, cs ...*cobra.Command) {
		for _, c := range cs {
			c.GroupID = id
			root.AddCommand(c)
		}
	}
	group("sweep", newRunCmd(env), newPlanCmd(env), newReportCmd(env), newCompareCmd(env), newExportCmd(env),
		newSummarizeCmd(env), newHistoryCmd(env), newServeCmd(env), newListCmd(env), newDoctorCmd(env), newGitHubCmd(env))
	group("shard", newExecuteCmd(env), newFinalizeCmd(env), newRecoverCmd(env))
	group("node", newImportCmd(env), newRankCmd(env), newBenchCmd(env), newFingerprintCmd(env))
	root.AddCommand(newVersionCmd(env))
	root.Args = unknownCommand
	root.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	for _, c := range root.Commands() {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			// a group of commands (history): a mistyped subcommand is a usage error with
			// one "did you mean", whatever flags follow it; alone, the group's help
			c.Args = unknownCommand
			c.FParseErrWhitelist.UnknownFlags = true
			c.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
		}
	}
	return root
}

// unknownCommand refuses an argument where a subcommand was expected: "unknown command
// "chek" for "opx history"; did you mean check?" (cobra's own message lists its
// suggestions on lines of their own, which a one-line error runs together).
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &UsageError{errors.New(msg)}
}

// suggestFlag adds "did you mean --NAME?" to an unknown-flag error when one of the
// command's flags is near it (suggest.Closest), as cobra does for commands.
func suggestFlag(c *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	best := suggest.Closest(name, names)
	// what other tools call a flag opx has under its own name
	if alt, ok := flagSynonyms[name]; ok && c.Flags().Lookup(alt.flag) != nil {
		return fmt.Errorf("%w; did you mean --%s? (%s)", err, alt.flag, alt.why)
	}
	if best == "" {
		return err
	}
	return fmt.Errorf("%w; did you mean --%s?", err, best)
}

// flagSynonyms are other tools' names for a flag opx has under its own, with how to give it.
var flagSynonyms = map[string]struct{ flag, why string }{
	"port":    {"listen", "opx serve listens on an address and port: --listen 127.0.0.1:8080"},
	"host":    {"listen", "opx serve listens on an address and port: --listen 0.0.0.0:8080"},
	"bind":    {"listen", "opx serve listens on an address and port: --listen 127.0.0.1:8080"},
	"address": {"listen", "opx serve listens on an address and port: --listen 127.0.0.1:8080"},
	"addr":    {"listen", "opx serve listens on an address and port: --listen 127.0.0.1:8080"},
}
