package testenv

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Postgres is the DSN of a fresh, empty database on the private PostgreSQL scripts/test.sh
// starts (OPX_TEST_POSTGRES, scripts/local-postgres.sh), dropped when the test ends. The
// test skips without one, and fails when OPX_REQUIRE_POSTGRES says the whole suite must run.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := service(t, "OPX_TEST_POSTGRES", "OPX_REQUIRE_POSTGRES", "no local PostgreSQL (scripts/test.sh starts one: scripts/local-postgres.sh)")
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := make([]byte, 6)
	rand.Read(b)
	name := "opx_test_" + hex.EncodeToString(b)
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating a test database on %s: %v", admin, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
