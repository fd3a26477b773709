// Package history keeps every case of every run in a store (SQLite or PostgreSQL) and finds where each
// case's level moved: `opx history add`, `check` and `report`.
//
// It keeps every case of every run it is given, and finds where each case's
// level moved: the store (SQLite through modernc.org/sqlite, or PostgreSQL through
// jackc/pgx; one schema, versioned migrations), `opx history add`, `check` (change points
// with false-discovery control, the gate, the confirmation manifest) and `report` (the
// page). docs/history.md says how it decides and what its figures are.
package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite" // the "sqlite" driver: pure Go, the binary stays static
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/semianalysis/opx/internal/files"
)

// Schema is the store's schema version this opx writes; a store of a newer one is refused
// (an older opx refuses one newer than its own). A change an older opx can ignore — a
// column with a default, a table it never reads — is a revision instead (revisions): it
// leaves Schema as it is, so the team's pinned older opx goes on adding to a store a newer
// one has opened.
const Schema = 3

// Revision is how many additive revisions (revisions) this opx's store has beyond Schema;
// a store of a later revision (a newer opx's additions) is read and written as it is.
var Revision = len(revisions)

// Store is an open history store.
type Store struct {
	db      *sql.DB
	pg      bool
	timeout time.Duration // how long it waits for a lock or an answer
	// reader is whether it was opened to read (OpenReader): it never migrated the store,
	// and rev is the revision it found (a column of a later revision is read as its default)
	reader bool
	rev    int
	// From is the schema and revision the store had before a writer's open migrated it
	// (equal to this opx's when nothing was to do).
	From [2]int
	// dsn is what it was opened from; file the SQLite file as opened (Replaced); readers
	// how many connections Readers allowed (a reopened store keeps it)
	dsn     string
	file    os.FileInfo
	readers int
	closed  bool // closed by Reopen
	// Where names the store in messages: the file, or the server's host and database.
	Where string
}

// DSN is the store a command uses: the flag's, else $OPX_HISTORY, else opx-history.db.
func DSN(flag string) string {
	if flag != "" {
		return flag
	}
	if s := os.Getenv("OPX_HISTORY"); s != "" {
		return s
	}
	return "opx-history.db"
}

// Open opens (creating, or migrating to Schema) the store at dsn: a postgres:// or
// postgresql:// URL, else a SQLite file. It refuses, leaving it untouched, a file that is
// not an opx store and a store written by a newer opx; an unreachable server fails within
// seconds, naming its host.
//
// create is whether a SQLite file that does not exist is made (add); a reader (check,
// report) is told instead that there is no store there.
// DefaultTimeout is how long a command waits on the store by default (--db-timeout): for
// another writer's lock, and for a server that stops answering.
const DefaultTimeout = 30 * time.Second

// Open waits at most timeout (0: DefaultTimeout) on the store: for another writer's lock
// (SQLite's busy wait, PostgreSQL's advisory locks), for a statement or lock on the
// server (statement_timeout, lock_timeout, idle_in_transaction_session_timeout), and for
// any answer of a server that stops sending (a read deadline on its connection).
func Open(ctx context.Context, dsn string, create bool, timeout time.Duration) (*Store, error) {
	return open(ctx, dsn, create, false, timeout)
}

// OpenReader opens the store to read it (check, report, serve's pages, a copy's source):
// it never creates, migrates or revises it and takes no write lock to open it (SQLite's
// transactions begin deferred: a reader never waits for a writer, whose changes go to the
// WAL). A store of an older schema is refused, naming opx history migrate; one of an
// older revision is read as it is (a later column as its default). The few writes a
// reader makes (a triage event from serve, the gate's record) are single statements.
func OpenReader(ctx context.Context, dsn string, timeout time.Duration) (*Store, error) {
	return open(ctx, dsn, false, true, timeout)
}

func open(ctx context.Context, dsn string, create, reader bool, timeout time.Duration) (*Store, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	path, pg, err := parseDSN(dsn)
	var s *Store
	switch {
	case err != nil:
		return nil, err
	case pg:
		s, err = openPG(ctx, dsn, reader, timeout)
	default:
		s, err = openSQLite(ctx, path, create, reader, timeout)
		if err == nil {
			s.file, _ = os.Stat(path)
		}
	}
	if s != nil {
		s.dsn = dsn
	}
	return s, err
}

// Replaced is whether the SQLite file the store was opened from is no longer at its path
// (another file put in its place: the workflow's new artifact, a restored backup — told by
// its inode, which a file made after the old one was freed may reuse, so a store closed
// by Reopen is always replaced); a PostgreSQL store never is.
func (s *Store) Replaced() bool {
	if s.closed { // closed by a Reopen whose open failed: the path has still to be opened
		return true
	}
	if s.pg || s.file == nil {
		return false
	}
	path, _, _ := parseDSN(s.dsn)
	now, err := os.Stat(path)
	return err != nil || !os.SameFile(s.file, now)
}

// ErrBusy is Reopen's answer while the store it would close is still being read: its WAL
// cannot be emptied yet (try again later; the store is still open).
var ErrBusy = errors.New("the store is in use: its WAL cannot be emptied yet")

// Reopen closes the store and opens what its path holds now, as it was opened (to read or
// to write, with its readers). The WAL and shared memory at the path are the old file's:
// opened with a file put in its place they would be replayed into it, and corrupt it. So
// the old store's WAL is first emptied into its own file (a TRUNCATE checkpoint: ErrBusy,
// the store left open, while a read of it is in progress), then the store is closed (with
// its WAL, now empty), and only then the path opened again. A store already closed by a
// reopen whose open failed is opened again at once.
func (s *Store) Reopen(ctx context.Context) (*Store, error) {
	if !s.closed {
		if !s.pg {
			var busy, logged, done int
			if err := s.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done); err != nil {
				return nil, fmt.Errorf("%s: emptying its WAL before opening the file put in its place: %w", s.Where, err)
			}
			if busy != 0 {
				return nil, ErrBusy
			}
		}
		s.Close()
		s.closed = true
	}
	ns, err := open(ctx, s.dsn, false, s.reader, s.timeout)
	if err != nil {
		return nil, err
	}
	if s.readers > 0 {
		ns.Readers(s.readers)
	}
	return ns, nil
}

// Identity names the store as it is now, for a health check: the file it has open with its
// inode, size and last change (as they are now), or the PostgreSQL server and database.
func (s *Store) Identity() string {
	if s.pg || s.file == nil {
		return s.Where
	}
	fi := s.file
	if path, _, _ := parseDSN(s.dsn); path != "" {
		if now, err := os.Stat(path); err == nil && os.SameFile(now, fi) {
			fi = now
		}
	}
	return fmt.Sprintf("%s (inode %d, %d bytes, modified %s)", s.Where, files.Inode(fi), fi.Size(), fi.ModTime().UTC().Format(time.RFC3339))
}

// parseDSN says what store dsn names: a PostgreSQL URL (pg), else a SQLite file's path
// (with or without sqlite: or sqlite://); a URL of another scheme is an ErrDSN.
func parseDSN(dsn string) (path string, pg bool, err error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return "", true, nil
	}
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && scheme != "sqlite" && !strings.ContainsAny(scheme, "/\\.") {
		return "", false, &ErrDSN{Scheme: scheme}
	}
	return strings.TrimPrefix(strings.TrimPrefix(dsn, "sqlite://"), "sqlite:"), false, nil
}

// Files are the files of the SQLite store dsn names (the database and its journals), none
// for a PostgreSQL one: what no output of a history command may be.
func Files(dsn string) []string {
	p, pg, err := parseDSN(dsn)
	if pg || err != nil {
		return nil
	}
	return []string{p, p + "-wal", p + "-shm", p + "-journal"}
}

// ErrDSN is a store named by a URL of a scheme opx does not keep a store in: a usage
// error.
type ErrDSN struct{ Scheme string }

func (e *ErrDSN) Error() string {
	return fmt.Sprintf("--db: a %s:// store is not one opx keeps: give a SQLite file path (or sqlite:PATH) or a postgres:// URL", e.Scheme)
}

// sqliteMagic is how every SQLite database file begins.
const sqliteMagic = "SQLite format 3\x00"

func openSQLite(ctx context.Context, path string, create, reader bool, timeout time.Duration) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	where := path
	// a store grants what the gate and the dashboard say: the user's own file, as a token
	// file is (files.CheckGranting: no link followed, not another user's, not writable by others)
	if li, err := os.Lstat(abs); err == nil && (li.Mode()&fs.ModeSymlink != 0 || li.Mode().IsRegular()) {
		if err := files.CheckGranting(where, "the history store", li, false); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(abs)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not an opx history store: not a regular file", where)
	case err == nil && st.Size() == 0:
		return nil, fmt.Errorf("%s is not an opx history store: an empty file (opx creates a store whole; left untouched)", where)
	case err == nil:
		f, err := os.Open(abs)
		if err != nil {
			return nil, err
		}
		head := make([]byte, len(sqliteMagic))
		_, err = io.ReadFull(f, head)
		f.Close()
		if err != nil || string(head) != sqliteMagic {
			return nil, fmt.Errorf("%s is not an opx history store: not a SQLite database (left untouched)", where)
		}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	case err != nil && !create:
		return nil, fmt.Errorf("no history store at %s: record a run first (opx history add RUN_DIR --db %s)", where, path)
	case err != nil:
		if d, err := os.Stat(filepath.Dir(abs)); err != nil || !d.IsDir() {
			return nil, fmt.Errorf("%s: its directory %s does not exist", where, filepath.Dir(abs))
		}
		if err := createSQLite(ctx, abs, where); err != nil {
			return nil, err
		}
	}
	// a writer waits for another (parallel adds) instead of failing; a writer's
	// transaction takes the write lock when it begins; a reader's begins deferred (it
	// reads the WAL's snapshot, never waiting for a writer)
	lock := "immediate"
	if reader {
		lock = "deferred"
	}
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: abs}).EscapedPath(),
		RawQuery: fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(0)&_txlock=%s", timeout.Milliseconds(), lock)}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; reads are in the same process
	s := &Store{db: db, Where: where, timeout: timeout, reader: reader}
	if reader {
		if err := s.readable(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return s, nil // a store opx made is in WAL mode already: nothing to write
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// WAL once the file is known to be ours: readers do not wait for a writer
	if err := walMode(ctx, db, timeout); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}

// createSQLite makes a new store at abs whole: made and migrated under a name of its own
// beside it, then linked into place (a store that another opx made first meanwhile is
// kept, and this one dropped). No reader ever sees a store half made, and an empty file
// is never a store.
func createSQLite(ctx context.Context, abs, where string) error {
	tmp := filepath.Join(filepath.Dir(abs), fmt.Sprintf(".%s.creating-%d", filepath.Base(abs), os.Getpid()))
	defer func() {
		for _, ext := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmp + ext)
		}
	}()
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Opaque: (&url.URL{Path: tmp}).EscapedPath()}).String())
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	s := &Store{db: db, Where: where}
	err = s.migrate(ctx)
	if err == nil {
		_, err = db.ExecContext(ctx, "PRAGMA journal_mode=WAL")
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: creating the store: %w", where, err)
	}
	if err := os.Link(tmp, abs); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: creating the store: %w", where, err)
	}
	return nil
}

// walMode puts the store in WAL mode. The change takes the file to itself, and SQLite
// says "busy" at once, without its busy timeout, when another opx is opening the same
// fresh store (parallel adds: 3 of 400 failed so in a stress of four at a time, none of
// 480 with the retry): it is tried again every 10–100 ms, for up to the timeout.
func walMode(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		_, err := db.ExecContext(ctx, "PRAGMA journal_mode=WAL")
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// readable checks, writing nothing, that a reader can read the store as it is: opx's
// schema (a newer one is refused, an older one names opx history migrate), and notes its
// revision.
func (s *Store) readable(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: s.pg})
	if err != nil {
		return s.opening(err)
	}
	defer tx.Rollback()
	tables, err := s.tables(ctx, tx)
	if err != nil {
		return s.opening(err)
	}
	if !tables["opx_history"] {
		if len(tables) > 0 {
			return fmt.Errorf("%s is not an opx history store: it holds other tables (left untouched)", s.Where)
		}
		return fmt.Errorf("%s holds no history yet: record a run first (opx history add RUN_DIR)", s.Where)
	}
	var v string
	if err := tx.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = 'schema'")).Scan(&v); isNoRows(err) {
		return fmt.Errorf("%s is not an opx history store: it has no schema version", s.Where)
	} else if err != nil {
		return s.opening(err)
	}
	version, err := strconv.Atoi(v)
	switch {
	case err != nil || version < 1:
		return fmt.Errorf("%s is not an opx history store: its schema version is %q", s.Where, v)
	case version > Schema:
		return fmt.Errorf("%s was written by a newer opx (history schema %d; this opx knows up to %d): upgrade opx", s.Where, version, Schema)
	case version < Schema:
		return fmt.Errorf("%s was written by an older opx (history schema %d; this opx reads %d): bring it forward with opx history migrate (or the next opx history add); a reader never changes a store", s.Where, version, Schema)
	}
	if s.rev, err = s.revision(ctx, tx); err != nil {
		return err
	}
	s.From = [2]int{version, s.rev}
	return nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// q is a statement in the store's dialect: SQLite's ? placeholders become $1, $2, … on
// PostgreSQL, and the types the two name differently are named.
func (s *Store) q(query string) string {
	if !s.pg {
		return strings.NewReplacer("{id}", "INTEGER PRIMARY KEY", "{real}", "REAL", "{blob}", "BLOB", "{norowid}", " WITHOUT ROWID").Replace(query)
	}
	query = strings.NewReplacer("{id}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "{real}", "DOUBLE PRECISION",
		"{blob}", "BYTEA", "{norowid}", "").Replace(query)
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// opening is an error met while opening the store, said as what it means.
func (s *Store) opening(err error) error {
	if !s.pg && strings.Contains(err.Error(), "not a database") {
		return fmt.Errorf("%s is not an opx history store: not a SQLite database (left untouched)", s.Where)
	}
	return fmt.Errorf("%s: %w", s.Where, err)
}
