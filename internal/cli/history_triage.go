// opx history triage: move a change to a state (open, acknowledged, expected, invalid).

package cli

import (
	"context"
	"fmt"
	"os/user"
	"strings"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/history/changes"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/spf13/cobra"
)

type historyTriageOptions struct {
	storeFlags
	state string
	note  string
	link  string
}

func newHistoryTriageCmd(env Env) *cobra.Command {
	o := &historyTriageOptions{}
	c := &cobra.Command{
		Use:   "triage CHANGE_ID --state STATE",
		Short: "Mark a change acknowledged, expected, invalid or open again",
		Long: `Record what the team knows of a change that opx history check found (its id is in check's
--json and on opx serve's pages): acknowledged (someone is on it: it still fails the gate
until its series recovers or it is marked expected), expected (an intended change: it no
longer fails --fail-on-regression), invalid (not a real change: noise, a bad node; it no
longer fails the gate either), or open again. --note says why, --link where it is
followed (an http or https URL). Every event is kept, with who made it and when; opx serve
shows the latest with its history. The change must be one check finds in the store; a
unique start of its id (4 characters or more) names it.`,
		Example: `  opx history triage c1a2b3c4d5e6f70 --state acknowledged --link https://github.com/org/repo/issues/12
  opx history triage c1a2b3c4d5e6f70 --state expected --note "the new driver's GEMM path, accepted"`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runHistoryTriage(c.Context(), env, o, args)
		},
	}
	f := c.Flags()
	o.AddFlags(f)
	f.StringVar(&o.state, "state", "", "acknowledged, expected, invalid or open (required)")
	f.StringVar(&o.note, "note", "", "why (at most 4000 bytes)")
	f.StringVar(&o.link, "link", "", "where it is followed: an http or https URL")
	_ = c.MarkFlagRequired("state")
	return c
}

func runHistoryTriage(ctx context.Context, env Env, o *historyTriageOptions, args []string) error {
	if err := history.CheckTriage(o.state, o.note, o.link); err != nil {
		return &UsageError{err}
	}
	s, err := o.open(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	found, err := s.Check(ctx, history.CheckOptions{Options: changes.Defaults, All: true})
	if err != nil {
		return err
	}
	id, known, several := found.ChangeID(args[0]) // a unique prefix names its change
	if len(several) > 1 {
		return &UsageError{fmt.Errorf("%s is the start of %d change ids (%s): give more of it", safe.Text(args[0]), len(several), strings.Join(several, ", "))}
	}
	who := env.getenv("USER")
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	ev, err := s.Triage(ctx, id, o.state, who, "cli", o.note, o.link, known)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "opx history triage: %s: %s → %s by %s\n", safe.Text(id), ev.From, ev.To, safe.Text(ev.Who))
	return nil
}
