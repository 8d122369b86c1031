package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rollbackLedger returns a ledger file (budget mu 1) in rollback-journal
// mode, as a tool that keeps that mode leaves it.
func rollbackLedger(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rb.db")
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Init(context.Background(), mustBudget(t, "default", 1, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	l.db.Close()
	sqlOn(t, path, `PRAGMA journal_mode = DELETE`)
	return path
}

// noticesDuring returns what WALNotice was told while f ran.
func noticesDuring(f func()) []string {
	var got []string
	old := WALNotice
	WALNotice = func(m string) { got = append(got, m) }
	defer func() { WALNotice = old }()
	f()
	return got
}

// unchanged fails t unless path's bytes are before's and it has no -wal or
// -shm file.
func unchanged(t *testing.T, what, path string, before []byte) {
	t.Helper()
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(now, before) {
		t.Errorf("%s: the file's bytes changed (header bytes 18-19 %v, were %v)", what, now[18:20], before[18:20])
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + ext); err == nil {
			t.Errorf("%s: a %s file exists", what, ext)
		}
	}
}

// Issue 23 §4: a charge that is refused without a write (a newer dpsql's
// file, a look-alike object, over the budget) leaves a rollback-journal file
// exactly as it was: not switched to WAL mode, no -wal or -shm file, no word
// of a switch. A charge that is written switches it, and says so once.
func TestRefusedChargeDoesNotSwitchToWAL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup []string
		mu    float64
		want  string
	}{
		{"a newer dpsql's file", []string{`PRAGMA user_version = 3`}, 0.1, "written by a newer dpsql"},
		{"a look-alike view", []string{`DROP VIEW dp_budget_status`, `CREATE VIEW dp_budget_status AS SELECT 'default' AS scope, 1e9 AS mu_budget, 0 AS mu_spent,
		1e9 AS mu_remaining, 0 AS epsilon_spent, 1e-5 AS delta, NULL AS epsilon_budget, NULL AS epsilon_rigorous, 0 AS entries,
		'add_remove' AS neighbours, 'mu-GDP' AS guarantee`}, 0.1, "dp_budget_status"},
		{"a charge over the budget", nil, 5, "budget"},
	} {
		path := rollbackLedger(t)
		if len(tc.setup) > 0 {
			sqlOn(t, path, tc.setup...)
		}
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		l, err := newLedgerConn(path)
		if err != nil {
			t.Fatal(err)
		}
		said := noticesDuring(func() {
			if _, err := l.Charge(ctx, gauss(tc.mu), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: the charge says %v, want a refusal naming %q", tc.name, err, tc.want)
			}
			if tc.setup != nil {
				db, err := sql.Open("sqlite3", path)
				if err != nil {
					t.Fatal(err)
				}
				if err := Init(ctx, db, mustBudget(t, "other", 1, 0, 1e-5)); err == nil {
					t.Errorf("%s: Init of another scope was not refused", tc.name)
				}
				db.Close()
			}
		})
		unchanged(t, tc.name+", while the ledger is open", path, before)
		l.db.Close()
		unchanged(t, tc.name, path, before)
		if len(said) > 0 {
			t.Errorf("%s: a refused charge said %q", tc.name, said)
		}
	}

	path := rollbackLedger(t)
	l, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.db.Close()
	said := noticesDuring(func() {
		for i := 0; i < 2; i++ {
			if _, err := l.Charge(ctx, gauss(0.1), nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(said) != 1 || !strings.Contains(said[0], "switched "+path+" to WAL mode") {
		t.Errorf("two charges said %q, want the switch said once", said)
	}
	var mode string
	if err := l.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("after a charge: journal mode %q (%v), want wal", mode, err)
	}
}

// Two ledgers on one rollback-journal file (two processes, as far as
// SQLite's locks go) charging at once: the checks before the switch decide
// nothing that is kept without the write lock, so the charges that commit
// never overspend, and the file ends in WAL mode.
func TestConcurrentFirstChargesOnRollbackFile(t *testing.T) {
	ctx := context.Background()
	path := rollbackLedger(t)
	var ls []*Ledger
	for i := 0; i < 2; i++ {
		l, err := newLedgerConn(path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.db.Close()
		ls = append(ls, l)
	}
	ok, start := make(chan int, 2), make(chan struct{})
	noticesDuring(func() {
		for _, l := range ls {
			go func(l *Ledger) {
				<-start
				n := 0
				for i := 0; i < 20; i++ {
					if _, err := l.Charge(ctx, gauss(0.3), nil); err == nil {
						n++
					}
				}
				ok <- n
			}(l)
		}
		start <- struct{}{}
		start <- struct{}{}
		a, b := <-ok, <-ok
		t.Logf("%d + %d charges committed", a, b)
		// 11 charges of 0.3 would be sqrt(0.99) < 1; 12 would not fit.
		if a+b > 11 || a+b == 0 {
			t.Errorf("%d and %d charges of mu 0.3 committed in a budget of mu 1", a, b)
		}
	})
	if n := ledgerRowsOf(path); n < 2 {
		t.Errorf("%d ledger rows", n)
	}
}
