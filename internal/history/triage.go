// Triage: a change's states (open, acknowledged, expected, invalid), the events that move
// it, and the state each change is in.

package history

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Triage states. A change starts open; acknowledged (someone is on it) still fails the
// gate; expected (an intended change) and invalid (not a real change: noise, a bad node)
// no longer do.
const (
	TriageOpen         = "open"
	TriageAcknowledged = "acknowledged"
	TriageExpected     = "expected"
	TriageInvalid      = "invalid"
)

// TriageStates are the states a change can be moved to.
var TriageStates = []string{TriageOpen, TriageAcknowledged, TriageExpected, TriageInvalid}

// MaxNote is the longest triage note kept, in bytes; a link is at most MaxLink.
const (
	MaxNote = 4000
	MaxLink = 2000
)

// TriageEvent is one move of a change's triage state.
type TriageEvent struct {
	At   time.Time `json:"at"`
	Who  string    `json:"who"`
	Via  string    `json:"via"` // where it came from: "cli", or the client's address
	From string    `json:"from"`
	To   string    `json:"to"`
	Note string    `json:"note,omitempty"`
	Link string    `json:"link,omitempty"`
}

// ChangeID is a change's stable id: its series' key and metric and the first run of its
// new level (run id and the time it measured), hashed; the same shift found by any later
// check has the same id.
func ChangeID(key, metric, runID, origin string) string {
	h := sha256.New()
	for _, s := range []string{key, metric, runID, origin} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return "c" + hex.EncodeToString(h.Sum(nil))[:15]
}

// CheckTriage checks a triage request: a known state, a note of at most MaxNote bytes of
// valid UTF-8, and a link that is empty or an http(s) URL with a host.
func CheckTriage(state, note, link string) error {
	if !slices.Contains(TriageStates, state) {
		return fmt.Errorf("state %q: one of %s", state, strings.Join(TriageStates, ", "))
	}
	if len(note) > MaxNote || !lookupable(note) { // no NUL: one answer on SQLite and PostgreSQL
		return fmt.Errorf("note: at most %d bytes of UTF-8 text, without NUL bytes", MaxNote)
	}
	if link != "" {
		u, err := url.Parse(link)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(link) > MaxLink {
			return fmt.Errorf("link %q: an http:// or https:// URL of at most %d bytes", link, MaxLink)
		}
	}
	return nil
}

// Triage moves a change to state, recording who did it, from where, why (note) and where
// it is followed (link). A change id the store has never recorded is accepted only when
// known says so (the caller found it in a check): an id typed wrong is refused.
func (s *Store) Triage(ctx context.Context, id, state, who, via, note, link string, known bool) (TriageEvent, error) {
	if err := CheckTriage(state, note, link); err != nil {
		return TriageEvent{}, err
	}
	if !lookupable(id) { // no store holds it: the same answer from both
		return TriageEvent{}, fmt.Errorf("no change %s in %s (opx history check --json lists each change's id)", storable(id), s.Where)
	}
	who, via = storable(who), storable(via)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return TriageEvent{}, fmt.Errorf("%s: %w", s.Where, err)
	}
	defer tx.Rollback()
	if s.pg {
		if err := s.lockPG(ctx, tx, 7243003, "triaging "+id); err != nil {
			return TriageEvent{}, err
		}
	}
	// one statement, its state before read as it writes: on SQLite it takes the write lock
	// as it begins (a reader's deferred transaction never upgrades a read, which a writer
	// meanwhile could make stale); an id never recorded is written only when known
	ev := TriageEvent{At: time.Now().UTC().Truncate(time.Second), Who: who, Via: via, To: state, Note: note, Link: link}
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO triage (change_id, at, who, via, from_state, to_state, note, link)
		SELECT ?, ?, ?, ?, COALESCE((SELECT to_state FROM triage WHERE change_id = ? ORDER BY id DESC LIMIT 1), ?), ?, ?, ?
		WHERE ? OR EXISTS (SELECT 1 FROM triage WHERE change_id = ?)
		RETURNING from_state`), id, ev.At.Unix(), who, via, id, TriageOpen, state, note, link, known, id).Scan(&ev.From)
	if isNoRows(err) {
		return TriageEvent{}, fmt.Errorf("no change %s in %s (opx history check --json lists each change's id)", id, s.Where)
	}
	if err != nil {
		return TriageEvent{}, fmt.Errorf("%s: recording the triage: %w", s.Where, err)
	}
	return ev, tx.Commit()
}

// TriageOf is every triage event of the changes ids, oldest first, by change id.
func (s *Store) TriageOf(ctx context.Context, ids []string) (map[string][]TriageEvent, error) {
	out := map[string][]TriageEvent{}
	const per = 500
	for lo := 0; lo < len(ids); lo += per {
		part := ids[lo:min(len(ids), lo+per)]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		q := "SELECT change_id, at, who, via, from_state, to_state, note, link FROM triage WHERE change_id IN (" +
			strings.TrimSuffix(strings.Repeat("?,", len(part)), ",") + ") ORDER BY id"
		rows, err := s.db.QueryContext(ctx, s.q(q), args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Where, err)
		}
		for rows.Next() {
			var id string
			var at int64
			var ev TriageEvent
			if err := rows.Scan(&id, &at, &ev.Who, &ev.Via, &ev.From, &ev.To, &ev.Note, &ev.Link); err != nil {
				rows.Close()
				return nil, fmt.Errorf("%s: %w", s.Where, err)
			}
			ev.At = time.Unix(at, 0).UTC()
			out[id] = append(out[id], ev)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// triaged gives each change its triage state and events.
func (s *Store) triaged(ctx context.Context, chs []Change) error {
	if len(chs) == 0 {
		return nil
	}
	var ids []string
	own := map[string]bool{}
	for i := range chs {
		ids = append(ids, chs[i].ID)
		ids = append(ids, chs[i].aliases...)
		own[chs[i].ID] = true
	}
	evs, err := s.TriageOf(ctx, ids)
	if err != nil {
		return err
	}
	for i := range chs {
		e := evs[chs[i].ID]
		// a later check may date the same change a run or two apart: the triage recorded
		// under the id it had then, and that id, carry over (never one another change found
		// now has)
		for _, a := range chs[i].aliases {
			if len(e) > 0 {
				break
			}
			if e = evs[a]; len(e) > 0 && !own[a] {
				chs[i].ID = a
			} else {
				e = nil
			}
		}
		if len(e) > 0 {
			chs[i].Triage, chs[i].TriageEvents = e[len(e)-1].To, e
		}
	}
	return nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// TriageVersion changes whenever a triage event is recorded: the newest event's id.
func (s *Store) TriageVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM triage").Scan(&v); err != nil {
		return 0, fmt.Errorf("%s: %w", s.Where, err)
	}
	return v, nil
}

// ChangeID is the id of the change id names: its own id, or a unique prefix of one (at
// least 4 characters) of the changes the check found; ok is false when none is, and more
// lists the ids a prefix shared by several names.
func (f *Found) ChangeID(id string) (full string, ok bool, more []string) {
	for _, c := range f.Changes {
		if c.ID == id {
			return id, true, nil
		}
	}
	if len(id) < 4 {
		return id, false, nil
	}
	for _, c := range f.Changes {
		if strings.HasPrefix(c.ID, id) && !slices.Contains(more, c.ID) {
			more = append(more, c.ID)
		}
	}
	if len(more) == 1 {
		return more[0], true, nil
	}
	return id, false, more
}
