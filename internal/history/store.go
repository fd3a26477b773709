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
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // the "sqlite" driver: pure Go, the binary stays static
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/semianalysis/opx/internal/files"
	"github.com/semianalysis/opx/internal/safe"
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

func openPG(ctx context.Context, dsn string, reader bool, timeout time.Duration) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("history store %s: does not parse as a PostgreSQL URL", Redact(dsn))
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = min(timeout, 15*time.Second)
	}
	ms := strconv.FormatInt(timeout.Milliseconds(), 10)
	for _, p := range []string{"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"} {
		cfg.RuntimeParams[p] = ms
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = fmt.Sprintf("opx history (pid %d)", os.Getpid())
	}
	// a server that stops answering mid-statement fails the read within the timeout
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: timeout}, nil
	}
	where := fmt.Sprintf("PostgreSQL at %s/%s", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), cfg.Database)
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(4)
	pctx, cancel := context.WithTimeout(ctx, min(timeout, 15*time.Second))
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s cannot be reached: %s", where, scrub(err, dsn))
	}
	s := &Store{db: db, pg: true, Where: where, timeout: timeout, reader: reader}
	check := s.migrate
	if reader {
		check = s.readable
	}
	if err := check(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
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

// idleConn is a server connection whose every read waits at most idle (--db-timeout) for
// its bytes: a server that stops answering ends the command within --db-timeout of it.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(b)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		err = &stalled{idle: c.idle, err: err}
	}
	return n, err
}

// stalled is a read of a server that sent nothing for the command's --db-timeout: the
// command ends then, whatever it was waiting for (the bound is the command's wait, not
// each statement's).
type stalled struct {
	idle time.Duration
	err  error
}

func (e *stalled) Error() string {
	return fmt.Sprintf("the server sent nothing for %s (--db-timeout): it stopped answering", e.idle)
}
func (e *stalled) Timeout() bool   { return true }
func (e *stalled) Temporary() bool { return false }
func (e *stalled) Unwrap() error   { return e.err }

// secretParams are the DSN parameters Redact hides.
var secretParams = []string{"password", "passfile", "sslkey", "sslpassword", "sslcert", "sslrootcert", "sslcrl"}

// Redact is a store URL as opx prints it: the password of its user and the values of every
// parameter that is or names a secret replaced by "xxxxx".
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a store URL that does not parse)"
	}
	q := u.Query()
	for _, p := range secretParams {
		if q.Has(p) {
			q.Set(p, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// scrub is err's text with every secret of dsn replaced (a driver may quote the URL).
func scrub(err error, dsn string) string {
	msg := err.Error()
	if u, perr := url.Parse(dsn); perr == nil {
		var secrets []string
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
		for _, p := range secretParams {
			if v := u.Query().Get(p); v != "" {
				secrets = append(secrets, v)
			}
		}
		for _, sec := range secrets {
			msg = strings.ReplaceAll(msg, sec, "xxxxx")
		}
	}
	return strings.ReplaceAll(msg, dsn, Redact(dsn))
}

// lockPG takes the transaction-scoped advisory lock key, waiting at most the store's
// timeout; when another session holds it that long, the error names that session (its
// pid, application and client) so the user can tell a stuck writer from a slow one.
func (s *Store) lockPG(ctx context.Context, tx *sql.Tx, key int64, what string) error {
	deadline := time.Now().Add(s.timeout)
	wait := 20 * time.Millisecond
	for {
		var got bool
		if err := tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock($1)", key).Scan(&got); err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
		if got {
			return nil
		}
		if time.Now().After(deadline) {
			holder := "a session that has ended since"
			var pid int
			var app, client string
			err := tx.QueryRowContext(ctx, `SELECT a.pid, COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'local socket')
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND l.objid = $1 LIMIT 1`, key).Scan(&pid, &app, &client)
			if err == nil {
				holder = fmt.Sprintf("pid %d (application %q, from %s)", pid, app, client)
			}
			return fmt.Errorf("%s: %s: waited %s for the store's lock, held by %s: try again when it is done, or end that session (SELECT pg_terminate_backend(%d))",
				s.Where, what, s.timeout, safe.Text(holder), pid)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
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

// migrations are the schema's versions: migrations[i] takes a store from version i to i+1.
// Times are Unix seconds; a point's GPU time is in milliseconds (an integer: a few bytes).
var migrations = [][]string{{
	`CREATE TABLE opx_history (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE runs (
		id {id}, run_id TEXT NOT NULL, attempt INTEGER NOT NULL, origin TEXT NOT NULL, at BIGINT NOT NULL,
		source_sha TEXT NOT NULL, opx_version TEXT NOT NULL, dir TEXT NOT NULL, added_at BIGINT NOT NULL,
		confirms BIGINT, cases INTEGER NOT NULL, measured INTEGER NOT NULL, UNIQUE (run_id, origin))`,
	`CREATE TABLE series (
		id {id}, key TEXT NOT NULL UNIQUE, testlist TEXT NOT NULL, op TEXT NOT NULL, args TEXT NOT NULL,
		backend TEXT NOT NULL, world_size INTEGER NOT NULL, cluster TEXT NOT NULL, metric TEXT NOT NULL,
		lower_is_better INTEGER NOT NULL)`,
	`CREATE TABLE contexts (
		id {id}, digest TEXT NOT NULL UNIQUE, node TEXT NOT NULL, gpu TEXT NOT NULL, driver TEXT NOT NULL,
		image_digest TEXT NOT NULL, sm_clock TEXT NOT NULL, throttle TEXT NOT NULL)`,
	`CREATE TABLE cells (id {id}, digest TEXT NOT NULL UNIQUE, body {blob} NOT NULL)`,
	`CREATE TABLE points (
		series BIGINT NOT NULL, at BIGINT NOT NULL, run BIGINT NOT NULL, outcome SMALLINT NOT NULL,
		value {real}, lo {real}, hi {real}, n INTEGER, gpu_ms BIGINT, ctx BIGINT NOT NULL, cell BIGINT NOT NULL,
		PRIMARY KEY (series, at, run)){norowid}`,
	`CREATE INDEX points_run ON points (run, series)`,
	// a confirmation run's points: not in their series' time, but set against the suspect
	// (the run it confirms) by check
	`CREATE TABLE confirmations (
		series BIGINT NOT NULL, run BIGINT NOT NULL, suspect_run BIGINT NOT NULL, outcome SMALLINT NOT NULL, value {real},
		ctx BIGINT NOT NULL, PRIMARY KEY (series, run))`,
}, {
	// 2: triage events, the one thing opx serve writes: who moved a change (ChangeID) from
	// which state to which, when, from where, with a note and a link
	`CREATE TABLE triage (
		id {id}, change_id TEXT NOT NULL, at BIGINT NOT NULL, who TEXT NOT NULL, via TEXT NOT NULL,
		from_state TEXT NOT NULL, to_state TEXT NOT NULL, note TEXT NOT NULL, link TEXT NOT NULL)`,
	`CREATE INDEX triage_change ON triage (change_id, id)`,
	// the same case on other clusters (opx serve's series page)
	`CREATE INDEX series_case ON series (args, op, backend, world_size, metric, testlist)`,
}, {
	// 3: each run's cases by backend and outcome and its GPU time, counted when it is
	// added (runTally; a run added before has none, and is counted from its points)
	`ALTER TABLE runs ADD COLUMN tally TEXT`,
}}

// revisions are the changes beyond Schema that an older opx can ignore: revisions[i]
// takes a store from revision i to i+1 (opx_history.revision; none recorded is 0) — its
// statements, then its function. An older opx's rows written after get the new columns'
// defaults.
var revisions = []struct {
	stmts []string
	fn    func(context.Context, *Store, *sql.Tx) error
}{{
	// 1: what contended with a point's measurement (another opx run on its machine, a busy
	// machine), with where it was measured; '' when nothing did (an older opx's contexts)
	stmts: []string{`ALTER TABLE contexts ADD COLUMN contended TEXT NOT NULL DEFAULT ''`},
}, {
	// 2: local series keyed by their machine (local@HOST), as runs added since are
	fn: rekeyLocal,
}, {
	// 3: what kind of machine measured (GPU model, max SM clock and power limit; a CPU's
	// model, cores, memory and flags): '' in an older opx's contexts (check derives one
	// from the GPU model and clock)
	stmts: []string{`ALTER TABLE contexts ADD COLUMN kind TEXT NOT NULL DEFAULT ''`},
}}

// migrate brings the store to Schema. An empty database is created; one with tables but
// no opx_history table is someone else's and is left alone; a newer schema is refused.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.opening(err)
	}
	defer tx.Rollback()
	if s.pg {
		if current, err := s.current(ctx, tx); err != nil || current {
			if err != nil {
				return err
			}
			s.From, s.rev = [2]int{Schema, Revision}, Revision
			return tx.Commit() // nothing to migrate: no lock taken (a reader never waits on one)
		}
		// parallel first adds: one creates the schema, the others then see it
		if err := s.lockPG(ctx, tx, 7243001, "creating the schema"); err != nil {
			return err
		}
	}
	tables, err := s.tables(ctx, tx)
	if err != nil {
		return s.opening(err)
	}
	version := 0
	if tables["opx_history"] {
		var v string
		if err := tx.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = 'schema'")).Scan(&v); isNoRows(err) {
			return fmt.Errorf("%s is not an opx history store: it has no schema version", s.Where)
		} else if err != nil {
			return s.opening(err)
		}
		if version, err = strconv.Atoi(v); err != nil || version < 1 {
			return fmt.Errorf("%s is not an opx history store: its schema version is %q", s.Where, v)
		}
	} else if len(tables) > 0 {
		return fmt.Errorf("%s is not an opx history store: it holds other tables (left untouched)", s.Where)
	}
	if version > Schema {
		return fmt.Errorf("%s was written by a newer opx (history schema %d; this opx knows up to %d): upgrade opx", s.Where, version, Schema)
	}
	s.From[0] = version
	up := "INSERT INTO opx_history (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
	if version < Schema {
		for v := version; v < Schema; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.ExecContext(ctx, s.q(stmt)); err != nil {
					return fmt.Errorf("%s: migrating to history schema %d: %w", s.Where, v+1, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(up), "schema", strconv.Itoa(Schema)); err != nil {
			return fmt.Errorf("%s: %w", s.Where, err)
		}
	}
	rev, err := s.revision(ctx, tx)
	if err != nil {
		return err
	}
	s.From[1], s.rev = rev, max(rev, Revision)
	if rev >= Revision {
		return tx.Commit() // current, or revised further by a newer opx: read and written as it is
	}
	for r := rev; r < Revision; r++ {
		for _, stmt := range revisions[r].stmts {
			if _, err := tx.ExecContext(ctx, s.q(stmt)); err != nil {
				return fmt.Errorf("%s: revising history schema %d to revision %d: %w", s.Where, Schema, r+1, err)
			}
		}
		if fn := revisions[r].fn; fn != nil {
			if err := fn(ctx, s, tx); err != nil {
				return fmt.Errorf("%s: revising history schema %d to revision %d: %w", s.Where, Schema, r+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(up), "revision", strconv.Itoa(Revision)); err != nil {
		return fmt.Errorf("%s: %w", s.Where, err)
	}
	return tx.Commit()
}

// revision is the store's additive revision (opx_history.revision; 0 when none is recorded).
func (s *Store) revision(ctx context.Context, tx *sql.Tx) (int, error) {
	var v string
	err := tx.QueryRowContext(ctx, s.q("SELECT value FROM opx_history WHERE name = 'revision'")).Scan(&v)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, s.opening(err)
	}
	r, err := strconv.Atoi(v)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("%s is not an opx history store: its revision is %q", s.Where, v)
	}
	return r, nil
}

// current is whether the PostgreSQL store already has this opx's schema.
func (s *Store) current(ctx context.Context, tx *sql.Tx) (bool, error) {
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT to_regclass('opx_history') IS NOT NULL").Scan(&exists); err != nil || !exists {
		if err != nil {
			return false, s.opening(err)
		}
		return false, nil
	}
	var v string
	err := tx.QueryRowContext(ctx, "SELECT value FROM opx_history WHERE name = 'schema'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.opening(err)
	}
	if v != strconv.Itoa(Schema) {
		return false, nil
	}
	r, err := s.revision(ctx, tx)
	return err == nil && r >= Revision, err
}

// opening is an error met while opening the store, said as what it means.
func (s *Store) opening(err error) error {
	if !s.pg && strings.Contains(err.Error(), "not a database") {
		return fmt.Errorf("%s is not an opx history store: not a SQLite database (left untouched)", s.Where)
	}
	return fmt.Errorf("%s: %w", s.Where, err)
}

// tables are the user tables in the database.
func (s *Store) tables(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	query := "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
	if s.pg {
		query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
	}
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}
