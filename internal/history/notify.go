// Announcing alert groups (opx history notify): which of a check's alert groups a webhook
// was not told of yet, what it is told (Slack's message, or a plain JSON document), and the
// record of what was told (the notices table), so that a group is announced once.

package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/safe"
)

// noticesRevision is the store revision that holds notices.
const noticesRevision = 5

// Target is how a webhook is recorded in the store: a digest of its URL, never the URL (a
// webhook's URL is its secret).
func Target(webhook string) string {
	h := sha256.Sum256([]byte(webhook))
	return "sha256:" + hex.EncodeToString(h[:8])
}

// Unannounced are the check's alert groups target was not told of: neither the group's
// id nor any of its changes' ids is recorded for it (a group dated a run apart on a later
// night is the same group), and not every change of it was triaged as expected or
// invalid. Where target was never told anything (its first notify), only the groups with
// a change new at the run under test are; the others are known (returned apart, to be
// recorded untold): a team that wires a webhook hears of tonight, not of its history.
func (s *Store) Unannounced(ctx context.Context, f *Found, target string) (news, known []Alert, err error) {
	if s.rev < noticesRevision {
		return nil, nil, fmt.Errorf("%s: a store of revision %d records no notices: open it to write (opx history migrate)", s.Where, s.rev)
	}
	told := map[string]bool{}
	rows, err := s.db.QueryContext(ctx, s.q("SELECT what FROM notices WHERE target = ?"), target)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("%s: %w", s.Where, err)
		}
		told[w] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	first := len(told) == 0
	byID := map[string]*Change{}
	for i := range f.Changes {
		byID[f.Changes[i].ID] = &f.Changes[i]
	}
	for _, a := range f.Alerts {
		seen, isNew, decided := told[a.ID], false, true
		for _, id := range a.Changes {
			c := byID[id]
			seen = seen || told[id]
			if c != nil {
				isNew = isNew || c.New
				decided = decided && (c.Triage == TriageExpected || c.Triage == TriageInvalid)
				for _, al := range c.aliases {
					seen = seen || told[al]
				}
			}
		}
		switch {
		case seen || decided:
		case first && !isNew:
			known = append(known, a)
		default:
			news = append(news, a)
		}
	}
	return news, known, nil
}

// FirstNotice is what is recorded for a webhook on its first notify, whatever its posts do:
// it is not told as a first notify again.
const FirstNotice = "first-notify"

// Announced records that target was told of the alert (its id and its changes' ids).
func (s *Store) Announced(ctx context.Context, target string, a Alert) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	defer tx.Rollback()
	now := time.Now().Unix()
	for _, w := range append([]string{a.ID}, a.Changes...) { // ON CONFLICT: told again is told once
		if _, err := tx.ExecContext(ctx, s.q("INSERT INTO notices (target, what, at) VALUES (?, ?, ?) ON CONFLICT (target, what) DO NOTHING"), target, w, now); err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	return nil
}

// MostListed is how many of a group's changes a message lists (the worst first).
const MostListed = 5

// Message is what a webhook is told of an alert group: Slack's incoming-webhook message
// (slack: a "text" fallback and one mrkdwn section), else a JSON document of the group and
// its changes. serveURL (OPX_SERVE_URL) links the group and each change to the dashboard.
func Message(f *Found, a Alert, slack bool, serveURL string) ([]byte, error) {
	serveURL = strings.TrimRight(serveURL, "/")
	byID := map[string]Change{}
	for _, c := range f.Changes {
		byID[c.ID] = c
	}
	var list []Change
	for _, id := range a.Changes {
		if c, ok := byID[id]; ok {
			list = append(list, c)
		}
	}
	group := ""
	if serveURL != "" {
		group = serveURL + "/?cluster=" + url.QueryEscape(a.Cluster)
	}
	link := func(c Change) string {
		if serveURL == "" {
			return ""
		}
		return serveURL + "/series?key=" + url.QueryEscape(c.Key)
	}
	if !slack {
		type change struct {
			ID        string  `json:"id"`
			Key       string  `json:"key"`
			Metric    string  `json:"metric"`
			Direction string  `json:"direction"`
			Speedup   float64 `json:"speedup"`
			Status    string  `json:"status"`
			Triage    string  `json:"triage"`
			URL       string  `json:"url,omitempty"`
		}
		doc := struct {
			Source  string   `json:"source"`
			Text    string   `json:"text"`
			Alert   Alert    `json:"alert"`
			Changes []change `json:"changes"`
			URL     string   `json:"url,omitempty"`
		}{Source: "opx", Text: "opx: " + a.line(), Alert: a, Changes: []change{}, URL: group}
		for _, c := range list {
			doc.Changes = append(doc.Changes, change{c.ID, c.Key, c.Metric, c.Direction, c.Speedup, c.Status, c.Triage, link(c)})
		}
		return json.Marshal(doc)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*opx: %s*", safe.Slack(a.line()))
	for i, c := range list {
		if i == MostListed {
			fmt.Fprintf(&b, "\n… and %d more", len(list)-MostListed)
			break
		}
		what := safe.SlackCode(c.Key)
		if l := link(c); l != "" {
			what = "<" + l + "|" + safe.Slack(CaseName(c.Key)) + ">"
		}
		fmt.Fprintf(&b, "\n• %s — %s (%s)", what, safe.Slack(compare.Words(c.Speedup)), c.Status)
	}
	if group != "" {
		fmt.Fprintf(&b, "\n<%s|Open the changes on %s>", group, safe.Slack(a.Cluster))
	}
	text := b.String()
	if len(text) > slackSection { // Slack refuses a section's text over 3,000 characters
		text = safe.Prefix(text, slackSection-len(slackCut)) + slackCut
	}
	msg := map[string]any{
		"text":   "opx: " + safe.Slack(a.line()),
		"blocks": []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}},
	}
	return json.Marshal(msg)
}

// slackSection is the most a Slack section block's text may hold; slackCut ends a text cut
// to it.
const (
	slackSection = 3000
	slackCut     = "\n… (cut: the dashboard has it all)"
)
