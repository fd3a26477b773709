package cli

import (
	"context"

	"github.com/semianalysis/opx/internal/serve"
	"github.com/spf13/cobra"
)

func newServeCmd(env Env) *cobra.Command {
	o := &serveOptions{serve: serve.Options{Log: env.Stderr}}
	c := &cobra.Command{
		Use:   "serve",
		Short: "The team's dashboard over a history store: changes with triage, series, runs",
		Long: `Serve the history store (--db: a SQLite file or postgres:// URL, as opx history reads it) as
web pages and the same data as JSON, for the team that runs the sweeps:

  /                  the changes at the newest run, worst first, with their triage state;
                     filters ?cluster= ?backend= ?testlist= ?op= ?state=; per cluster counts
  /series?key=KEY    one case over time: its plot, points, changes and the same case on
                     the other clusters (latest value and % of roofline)
  /runs, /runs/ID    the stored runs with their verdict and GPU-hours; a run's cases
  /compare?base=ID&new=ID   two stored runs compared as opx compare compares them
  /healthz           200 ok when the store answers, 503 when not
  /api/...           every page's data as JSON (/api/changes, /api/series?key=, /api/runs,
                     /api/runs/ID, /api/compare?base=&new=)

Triage: POST /api/changes/ID/triage {"state": "acknowledged|expected|invalid|open",
"note": "...", "link": "https://..."} with Authorization: Bearer TOKEN, always (tokens
from --token-file: one a line, name:token to name it; # comments). opx history triage is
the same from the command line, and history check honours it.

Safe by default: it listens on 127.0.0.1:8080; any other address needs --token-file,
and then every request but /healthz needs a token unless --public-read. It writes
nothing to the store but triage events. It reads the store live: a run added appears on
the next page load. SIGTERM or Ctrl-C lets the requests in flight finish and exits 0; a
second signal cuts them short (exit 130 or 143). On loopback it answers only requests
addressed to this machine (Host localhost, 127.0.0.0/8, [::1]): DNS rebinding reads nothing.`,
		Example: `  opx serve --db opx-history.db
  opx serve --db "$OPX_HISTORY_DSN" --listen 0.0.0.0:8080 --token-file /etc/opx/tokens`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runServe(c.Context(), o)
		},
	}
	f := c.Flags()
	o.AddFlags(f)
	f.StringVar(&o.serve.Listen, "listen", "127.0.0.1:8080", "host:port to listen on (a non-loopback address needs --token-file)")
	f.StringVar(&o.serve.TokenFile, "token-file", "", "bearer tokens, one a line (name:token to name it): triage needs one, and reads too off loopback")
	f.BoolVar(&o.serve.PublicRead, "public-read", false, "with --token-file off loopback: reads need no token (triage still does)")
	return c
}

// serveOptions are serve's flags: the store's, and the dashboard's (serve.Options).
type serveOptions struct {
	storeFlags
	serve serve.Options
}

func runServe(ctx context.Context, o *serveOptions) error {
	if err := serve.CheckListen(o.serve.Listen, o.serve.TokenFile, o.serve.PublicRead); err != nil {
		return &UsageError{err} // before the store is opened
	}
	if err := notTheStore("--token-file", o.serve.TokenFile, o.db); err != nil {
		return err
	}
	s, err := o.reader(ctx) // serve never migrates: it reads, and writes triage events
	if err != nil {
		return err
	}
	defer s.Close()
	o.serve.Store, o.serve.Where = s, s.Where
	return serve.Run(ctx, o.serve)
}
