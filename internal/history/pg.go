// PostgreSQL: opening a server's store, the idle deadline that turns a stalled server into
// an error, secrets kept out of every message, and the writers' advisory lock.

package history

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/semianalysis/opx/internal/safe"
)

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

func (e *stalled) Timeout() bool { return true }

func (e *stalled) Temporary() bool { return false }

func (e *stalled) Unwrap() error { return e.err }

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
