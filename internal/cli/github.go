// opx github report: a pull request's A/B report posted as one PR comment and one check.

package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/github"
	"github.com/semianalysis/opx/internal/safe"
)

func newGitHubCmd(env Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "github",
		Short: "Post a pull request's verdict to GitHub: one comment and one check",
		Long: `Post through GitHub's REST API with the workflow's token ($GITHUB_TOKEN, with
pull-requests: write and checks: write), to the repository $GITHUB_REPOSITORY (--repo)
at $GITHUB_API_URL (GitHub Enterprise; https://api.github.com by default). docs/pr.md.`,
	}
	c.AddCommand(newGitHubReportCmd(env))
	return c
}

type githubReportOptions struct {
	report, repo, sha, name, annotate string
	author                            string
	pr                                int
	client                            github.Client
}

func newGitHubReportCmd(env Env) *cobra.Command {
	o := &githubReportOptions{}
	c := &cobra.Command{
		Use:   "report --report AB_JSON --pr N --sha HEAD_SHA",
		Short: "Post an A/B report as the PR's one comment and the head commit's one check",
		Long: `Post the A/B report (ab.json: each selected case's ratio head/base, its interval and
verdict) as the pull request's comment — one comment, found again by a hidden marker and
updated in place on every re-run — and as a check run of --name on the head commit —
one, updated in place — whose conclusion is the report's: failure when a case is slower
with its whole interval (at the level of all the run's cases) beyond the threshold, when
a case the base measured was not measured by the head or its shard failed, when nothing
was measured on both sides, or when the A/B ended before it could judge a case; else
success. Each failing case is an annotation (at
--annotate-path, line 1). Exit 1 when the conclusion is failure or a post failed (a 422
or 4xx at once, saying what GitHub said; a spent rate limit waits for its reset, a 5xx is
tried again), 2 on a usage error.`,
		Example: `  opx github report --report ab.json --pr 123 --sha "$HEAD_SHA"`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if o.repo == "" {
				o.repo = env.getenv("GITHUB_REPOSITORY")
			}
			o.client = github.Client{API: env.getenv("GITHUB_API_URL"), Repo: o.repo, Token: env.getenv("GITHUB_TOKEN")}
			return runGitHubReport(c.Context(), env, o)
		},
	}
	c.Flags().StringVar(&o.report, "report", "", "the A/B report (ab.json)")
	c.Flags().IntVar(&o.pr, "pr", 0, "the pull request's number")
	c.Flags().StringVar(&o.sha, "sha", "", "the head commit the check is of (its full SHA)")
	c.Flags().StringVar(&o.repo, "repo", "", "owner/name (default $GITHUB_REPOSITORY)")
	c.Flags().StringVar(&o.name, "name", "opx A/B", "the check run's name")
	c.Flags().StringVar(&o.author, "as", "github-actions[bot]", "the login the token posts as (a personal token's user, an app's bot): its comment is the one updated")
	c.Flags().StringVar(&o.annotate, "annotate-path", ".github/workflows/operatorx-pr-ab.yml", "the file each failing case's annotation is on")
	return c
}

func runGitHubReport(ctx context.Context, env Env, o *githubReportOptions) error {
	if o.report == "" || o.pr <= 0 || o.sha == "" {
		return &UsageError{fmt.Errorf("give --report AB_JSON, --pr N (above 0) and --sha HEAD_SHA")}
	}
	o.client.Repo, o.client.Author = o.repo, o.author
	if err := o.client.Valid(); err != nil {
		return &UsageError{err}
	}
	if err := github.ValidSHA(o.sha); err != nil {
		return &UsageError{fmt.Errorf("--sha: %w", err)}
	}
	r, err := ab.ReadReport(ctx, o.report)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	conclusion, why := r.Conclusion()
	md := r.Markdown()
	created, id, err := o.client.Comment(ctx, o.pr, ab.Marker, md)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "opx github: the comment on pull request %d %s (id %d)\n", o.pr, map[bool]string{true: "created", false: "updated in place"}[created], id)
	run := github.CheckRun{Name: o.name, Conclusion: conclusion, Title: why, Summary: md, Text: r.Details()}
	for _, c := range r.Cases {
		if c.Fails {
			run.Annotations = append(run.Annotations, github.Annotation{Path: o.annotate, StartLine: 1, EndLine: 1, Level: "failure", Title: safe.Trunc(safe.OneLine(c.Key), 255),
				Message: fmt.Sprintf("%s %.3fx head/base (%.0f%% interval %.3f–%.3f, %d pairs): slower beyond %.0f%%", safe.OneLine(c.Metric), c.Ratio, 100*r.Rules.Level, c.Lo, c.Hi, c.Pairs, 100*r.Rules.Threshold)})
		}
	}
	created, id, err = o.client.Check(ctx, o.sha, run)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "opx github: the check %q on %.12s %s (id %d): %s, %s\n", o.name, o.sha, map[bool]string{true: "created", false: "updated in place"}[created], id, conclusion, why)
	if conclusion != "success" {
		return &ExitError{Code: 1}
	}
	return nil
}
