package serve_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/serve"
)

const dpCount = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) COUNT(*) AS n FROM patients`

// clinic is a database file with a protected table patients(pid, sex, age,
// bmi) of n rows (one per person), a public table wards, and one budget
// scope per entry of scopes (its mu, delta 1e-5).
type clinic struct {
	path  string
	owner *sql.DB
}

func newClinic(t testing.TB, n int, scopes map[string]float64) *clinic {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clinic.db")
	owner, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	c := &clinic{path: path, owner: owner}
	for name, mu := range scopes {
		c.exec(t, `SELECT dp_init(?, 1e-5, ?)`, mu, name)
	}
	c.exec(t, `CREATE TABLE patients (pid INTEGER, sex TEXT, age INTEGER, bmi REAL)`)
	c.exec(t, `CREATE TABLE wards (name TEXT, beds INTEGER)`)
	c.exec(t, `INSERT INTO wards VALUES ('north', 12), ('south', 8)`)
	c.exec(t, `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
		INSERT INTO patients SELECT i, CASE i % 2 WHEN 0 THEN 'F' ELSE 'M' END, 20 + i % 60, 18 + (i % 25) FROM s`, n)
	c.exec(t, `SELECT dp_protect('patients', json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1))`)
	return c
}

func (c *clinic) exec(t testing.TB, q string, args ...any) {
	t.Helper()
	if _, err := c.owner.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// ledger returns the file's ledger hashes, to compare before and after.
func (c *clinic) ledger(t testing.TB) string {
	t.Helper()
	var s string
	if err := c.owner.QueryRow(`SELECT coalesce(group_concat(hash), '') FROM dp_ledger`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// charges returns the number of charges in scope.
func (c *clinic) charges(t testing.TB, scope string) int {
	t.Helper()
	var n int
	if err := c.owner.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge' AND scope = ?`, scope).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (c *clinic) account(t testing.TB, name, scope string) string {
	t.Helper()
	tok, err := serve.AddAccount(context.Background(), c.path, name, scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// start serves the clinic on a loopback listener.
func (c *clinic) start(t testing.TB, cfg serve.Config) (*serve.Server, *httptest.Server) {
	t.Helper()
	cfg.Path = c.path
	if cfg.Rate == 0 {
		cfg.Rate, cfg.Burst = 1e6, 1e6
	}
	srv, err := serve.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return srv, hs
}

// hmacHex is the stored form of token under a hex salt (serve.Hasher).
func hmacHex(saltHex, token string) string {
	salt, _ := hex.DecodeString(saltHex)
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

func client(hs *httptest.Server, token string) *serve.Client {
	return &serve.Client{URL: hs.URL, Token: token, HTTP: hs.Client()}
}

// apiCode returns the API error code of err ("" for nil).
func apiCode(err error) string {
	if err == nil {
		return ""
	}
	var ae *serve.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return fmt.Sprintf("not an API error: %v", err)
}
