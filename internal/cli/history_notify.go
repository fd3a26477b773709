// opx history notify: tell the team's channel of each new alert group of the check.

package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/history"
	"github.com/semianalysis/opx/internal/safe"
	"github.com/semianalysis/opx/internal/webhook"
)

type historyNotifyOptions struct {
	storeFlags
	webhook string
	format  string
	dryRun  bool
	serve   string // OPX_SERVE_URL
	poster  webhook.Poster
}

func newHistoryNotifyCmd(env Env) *cobra.Command {
	o := &historyNotifyOptions{}
	c := &cobra.Command{
		Use:   "notify",
		Short: "Tell a Slack or JSON incoming webhook of each new alert group of the check",
		Long: `Post one message per new alert group of the check of the newest run (the changes of
one run that share their first run, cluster, direction and what changed under them: the
unit a team triages), with links to the team's opx serve ($OPX_SERVE_URL). A group is
announced once: what was told to a webhook is recorded in the store (by a digest of the
webhook's URL, never the URL), and a group seen again on a later night — or dated a run
apart, or grown by more cases — is not told again. A group whose every change was triaged
expected or invalid is not told. The first notify to a webhook tells only what is new at
the newest run, and takes the groups that stood before as known.

The webhook is --webhook, else $OPX_ALERT_WEBHOOK (keep it in a secret: its URL is its
key); Slack's (hooks.slack.com) gets Slack's message, any other a JSON document
({"source", "text", "alert", "changes", "url"}); --format chooses. A failed post is tried
again (no answer, 429 after its Retry-After, 5xx: 3 tries), then said on stderr and left
to the next notify: it never fails the nightly (exit 0). Usage errors exit 2.`,
		Example: `  OPX_ALERT_WEBHOOK=https://hooks.slack.com/services/T0/B0/XXXX opx history notify
  opx history notify --webhook https://alerts.example.com/opx --format json
  opx history notify --dry-run          # print the messages, post and record nothing`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.serve = env.getenv("OPX_SERVE_URL")
			if o.webhook == "" {
				o.webhook = env.getenv("OPX_ALERT_WEBHOOK")
			}
			return runHistoryNotify(c.Context(), env, o)
		},
	}
	o.AddFlags(c.Flags())
	c.Flags().StringVar(&o.webhook, "webhook", "", "the incoming webhook's URL (default $OPX_ALERT_WEBHOOK)")
	c.Flags().StringVar(&o.format, "format", "auto", "the message: slack, json, or auto (slack for hooks.slack.com, else json)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print each message on stdout; post nothing, record nothing")
	return c
}

func runHistoryNotify(ctx context.Context, env Env, o *historyNotifyOptions) error {
	var slack bool
	switch o.format {
	case "slack", "json", "auto":
	default:
		return &UsageError{fmt.Errorf("--format %s: give slack, json or auto", safe.Text(o.format))}
	}
	var host string
	if !o.dryRun || o.webhook != "" {
		if o.webhook == "" {
			return &UsageError{fmt.Errorf("no webhook: give --webhook URL or set OPX_ALERT_WEBHOOK (a Slack or JSON incoming webhook), or --dry-run")}
		}
		u, err := webhook.Check(o.webhook)
		if err != nil {
			return &UsageError{fmt.Errorf("--webhook: %w", err)}
		}
		host = u.Host
		slack = o.format == "slack" || o.format == "auto" && u.Hostname() == "hooks.slack.com"
	} else {
		slack = o.format == "slack"
	}
	if o.serve != "" {
		if u, err := url.Parse(o.serve); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return &UsageError{fmt.Errorf("OPX_SERVE_URL=%s: give the dashboard's http(s) URL, or leave it unset", safe.Text(o.serve))}
		}
	}
	s, err := o.open(ctx, false) // a writer: what was told is recorded
	if err != nil {
		return err
	}
	defer s.Close()
	state, err := s.State(ctx)
	if err != nil {
		return err
	}
	f, err := s.KeptCheck(ctx, state) // the check add kept, else made now
	switch {
	case err == nil && f == nil:
		f, err = s.NewestCheck(ctx)
	case err == nil: // its triage as of now: a group triaged since the add is not told
		err = s.Triaged(ctx, f.Changes)
	}
	if err != nil {
		return err
	}
	target := history.Target(o.webhook)
	news, known, err := s.Unannounced(ctx, f, target)
	if err != nil {
		return err
	}
	if o.dryRun {
		for _, a := range news {
			b, err := history.Message(f, a, slack, o.serve)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s\n", b)
		}
		fmt.Fprintf(env.Stderr, "opx history notify: --dry-run: %d new alert group(s) of %d; nothing posted or recorded\n", len(news), len(f.Alerts))
		return nil
	}
	// a webhook's first notify: what stood before is known, and the webhook is known to
	// have been notified (a group whose post fails tonight is told on a later night, not
	// taken as known then)
	if err := s.Announced(ctx, target, history.Alert{ID: history.FirstNotice}); err != nil {
		return err
	}
	for _, a := range known {
		if err := s.Announced(ctx, target, a); err != nil {
			return err
		}
	}
	told, failed := 0, 0
	for _, a := range news {
		b, err := history.Message(f, a, slack, o.serve)
		if err != nil {
			return err
		}
		if _, err := o.poster.Post(ctx, o.webhook, b, nil); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed++
			fmt.Fprintf(env.Stderr, "opx history notify: alert %s (%s) not told: %s; the next notify tries again\n", a.ID, safe.OneLine(a.Line()), safe.OneLine(err.Error()))
			continue
		}
		if err := s.Announced(ctx, target, a); err != nil {
			return err
		}
		told++
	}
	what := fmt.Sprintf("told %s of %d new alert group(s)", safe.Text(host), told)
	if failed > 0 {
		what += fmt.Sprintf("; %d could not be told", failed)
	}
	if len(known) > 0 {
		what += fmt.Sprintf("; its first notify: %d group(s) that stood before taken as known, untold", len(known))
	}
	fmt.Fprintf(env.Stderr, "opx history notify: %s (%d alert group(s) in the check of %s)\n", what, len(f.Alerts), newestName(f))
	if failed > 0 && env.getenv("GITHUB_ACTIONS") == "true" {
		fmt.Fprintf(env.Stdout, "::warning::opx history notify: %d alert group(s) could not be told to %s\n", failed, safe.Text(host))
	}
	return nil
}

// newestName is the check's run under test as said ("none" in an empty store).
func newestName(f *history.Found) string {
	if f.Newest == nil {
		return "no run"
	}
	return strings.TrimSpace(f.Newest.Name())
}
