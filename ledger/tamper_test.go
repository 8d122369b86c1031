package ledger

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/accountant"
)

// The tamper cases of issue 23 §1, each on a file at rest (every
// connection closed, the WAL checkpointed into the file), as someone who
// owns a copy of the file edits it: Verify names the disagreement, and a
// charge by a fresh process (which has no memo of the file) refuses and
// writes nothing.

// restingLedger writes a ledger file with scopes default (mu 1) and the
// others named, one Gaussian charge of mu 0.3 in default, and returns its
// path once every connection is closed.
func restingLedger(t testing.TB, others ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append([]string{"default"}, others...) {
		b, _ := accountant.NewBudget(s, 1, 0, 1e-5)
		if err := l.Init(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Charge(ctx, gauss(0.3), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.db.Close(); err != nil {
		t.Fatal(err)
	}
	sqlOn(t, path, `PRAGMA journal_mode = DELETE`) // the WAL into the file
	return path
}

// sqlOn runs statements on path through a connection of its own.
func sqlOn(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// verifyFile runs Verify on path, read only.
func verifyFile(path string) error {
	_, err := verifyFileNotes(path)
	return err
}

// verifyFileNotes is verifyFile with Verify's notes.
func verifyFileNotes(path string) ([]string, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r, err := VerifyAt(context.Background(), db, nil)
	return r.Notes, err
}

// chargeFile charges mu 0.1 to default as a fresh process would, and
// reports the error (nil: the charge was committed).
func chargeFile(t testing.TB, path string) error {
	t.Helper()
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.db.Close()
	_, err = l.Charge(context.Background(), gauss(0.1), nil)
	return err
}

// ledgerRowsOf counts dp_ledger's rows (-1 when the file cannot say).
func ledgerRowsOf(path string) int {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return -1
	}
	defer db.Close()
	n := -1
	if db.QueryRow(`SELECT count(*) FROM dp_ledger`).Scan(&n) != nil {
		return -1
	}
	return n
}

// pageOf returns the page size and the root page of the named object.
func pageOf(t testing.TB, path, name string) (size, root int) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, name).Scan(&root); err != nil {
		t.Fatal(err)
	}
	return size, root
}

// childPages returns the child pages of the b-tree interior page n (none
// for a leaf), from the file's bytes.
func childPages(data []byte, size, n int) []int {
	p := data[(n-1)*size : n*size]
	h := 0
	if n == 1 {
		h = 100
	}
	if t := p[h]; t != 0x02 && t != 0x05 { // interior index, interior table
		return nil
	}
	cells := int(binary.BigEndian.Uint16(p[h+3:]))
	var out []int
	for i := range cells {
		off := int(binary.BigEndian.Uint16(p[h+12+2*i:]))
		out = append(out, int(binary.BigEndian.Uint32(p[off:])))
	}
	return append(out, int(binary.BigEndian.Uint32(p[h+8:])))
}

func TestTamperCases(t *testing.T) {
	ctx := context.Background()
	manyScopes := make([]string, 300)
	for i := range manyScopes {
		manyScopes[i] = fmt.Sprintf("scope-%03d-%s", i, strings.Repeat("x", 40))
	}
	for _, tc := range []struct {
		name   string
		others []string // more scopes
		tamper func(t *testing.T, path string)
		verify string // in Verify's error
		status bool   // ReadStatus must refuse too
	}{
		{name: "look-alike dp_budget_status", verify: "dp_budget_status", status: true, tamper: func(t *testing.T, path string) {
			sqlOn(t, path, `DROP VIEW dp_budget_status`, `CREATE VIEW dp_budget_status AS SELECT 'default' AS scope, 1e9 AS mu_budget, 0 AS mu_spent,
				1e9 AS mu_remaining, 0 AS epsilon_spent, 1e-5 AS delta, NULL AS epsilon_budget, NULL AS epsilon_rigorous, 0 AS entries,
				'add_remove' AS neighbours, 'mu-GDP' AS guarantee`)
		}},
		{name: "tail deleted, trigger put back", verify: "dp_scope_state", tamper: func(t *testing.T, path string) {
			sqlOn(t, path, `DROP TRIGGER dp_ledger_no_delete`, `DELETE FROM dp_ledger WHERE id = (SELECT max(id) FROM dp_ledger)`,
				"CREATE TRIGGER dp_ledger_no_delete "+protectingTriggers[1].body)
		}},
		{name: "user_version -1", verify: "schema version -1", status: true, tamper: func(t *testing.T, path string) {
			sqlOn(t, path, `PRAGMA user_version = -1`)
		}},
		// A version-2 file that says version 1 (version 1's view is not
		// this file's) and one that says a later version than this dpsql's.
		{name: "user_version 1", verify: "view dp_budget_status was replaced", status: true, tamper: func(t *testing.T, path string) {
			sqlOn(t, path, `PRAGMA user_version = 1`)
		}},
		{name: "user_version 3", verify: "written by a newer dpsql (ledger schema version 3; this dpsql reads up to 2): upgrade dpsql", status: true,
			tamper: func(t *testing.T, path string) {
				sqlOn(t, path, `PRAGMA user_version = 3`)
			}},
		{name: "user_version 99", verify: "written by a newer dpsql (ledger schema version 99; this dpsql reads up to 2): upgrade dpsql", status: true,
			tamper: func(t *testing.T, path string) {
				sqlOn(t, path, `PRAGMA user_version = 99`)
			}},
		{name: "dp_budget's index pages swapped", others: manyScopes, verify: "integrity check of dp_budget", tamper: func(t *testing.T, path string) {
			size, root := pageOf(t, path, "sqlite_autoindex_dp_budget_1")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			kids := childPages(data, size, root)
			if len(kids) < 3 {
				t.Fatalf("dp_budget's index has %d leaf pages, want 3 or more to swap two", len(kids))
			}
			a, b := kids[0], kids[len(kids)-1]
			pa := append([]byte(nil), data[(a-1)*size:a*size]...)
			copy(data[(a-1)*size:a*size], data[(b-1)*size:b*size])
			copy(data[(b-1)*size:b*size], pa)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dp_budget data page zeroed", verify: "dp_budget", tamper: func(t *testing.T, path string) {
			size, root := pageOf(t, path, "dp_budget")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			clear(data[(root-1)*size : root*size])
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dp_budget trigger dropped", verify: "dp_budget_no_update", tamper: func(t *testing.T, path string) {
			sqlOn(t, path, `DROP TRIGGER dp_budget_no_update`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := restingLedger(t, tc.others...)
			if err := verifyFile(path); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			tc.tamper(t, path)
			err := verifyFile(path)
			if err == nil || !strings.Contains(err.Error(), tc.verify) {
				t.Errorf("Verify: %v, want an error naming %q", err, tc.verify)
			}
			if tc.status {
				db, _ := sql.Open("sqlite3", "file:"+path+"?mode=ro")
				st, err := ReadStatus(ctx, db, "default")
				db.Close()
				if err == nil {
					t.Errorf("ReadStatus read %+v from the tampered file", st)
				}
			}
			before := ledgerRowsOf(path)
			if err := chargeFile(t, path); err == nil {
				t.Error("a charge was committed on the tampered file")
			} else {
				t.Logf("charge refused: %v", err)
			}
			if after := ledgerRowsOf(path); after != before {
				t.Errorf("dp_ledger went from %d to %d rows", before, after)
			}
			// The evidence is still there.
			if err := verifyFile(path); err == nil {
				t.Error("Verify passes after the charge attempt: the evidence was overwritten")
			}
		})
	}
}

// The stated limit: a tail deleted together with a consistent rewrite of
// the derived tables is a consistent file. Only a head kept elsewhere
// catches it (VerifyAt with want); a charge cannot tell.
func TestConsistentTailRollbackNeedsAKeptHead(t *testing.T) {
	ctx := context.Background()
	path := restingLedger(t)
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := ReadHead(ctx, db)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Delete the charge and every derived row it made, as if it never was.
	sqlOn(t, path, `DROP TRIGGER dp_ledger_no_delete`, `DELETE FROM dp_ledger WHERE id = (SELECT max(id) FROM dp_ledger)`,
		"CREATE TRIGGER dp_ledger_no_delete "+protectingTriggers[1].body, `DELETE FROM dp_scope_state`)
	if err := verifyFile(path); err != nil {
		t.Errorf("Verify of a consistent rollback: %v (if this now fails, update the stated limit)", err)
	}
	db, _ = sql.Open("sqlite3", "file:"+path+"?mode=ro")
	defer db.Close()
	if _, err := VerifyAt(ctx, db, &kept); !errors.Is(err, ErrChainBroken) {
		t.Errorf("VerifyAt with the kept head: %v, want ErrChainBroken", err)
	}
}
