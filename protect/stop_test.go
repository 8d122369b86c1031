package protect_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/protect"
)

// slowClinic is a clinic of n patients (a budget of mu = 2; max_groups 2,
// max_rows 1, so the read bounds each person with window functions) and the
// time one read of q (a format of mu) takes on it, measured through an
// analyst connection (charged once, mu 0.1).
func slowClinic(t *testing.T, n int, q string) (path string, owner *sql.DB, read time.Duration) {
	t.Helper()
	path, owner = newClinic(t, 2, "", func(*sql.Tx) {})
	mustExec(t, owner, fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)
		INSERT INTO patients SELECT i, CASE i %% 2 WHEN 0 THEN 'F' ELSE 'M' END, 20 + i %% 60, 18 + (i %% 25) FROM s`, n))
	mustExec(t, owner, `SELECT dp_protect('patients', json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1))`)
	a := openAnalyst(t, path)
	t0 := time.Now()
	if _, _, err := queryAll(context.Background(), a, fmt.Sprintf(q, 0.1)); err != nil {
		t.Fatal(err)
	}
	return path, owner, time.Since(t0)
}

const (
	slowQuery  = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) sex, COUNT(*) AS n FROM patients GROUP BY sex`
	countQuery = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) COUNT(*) AS n FROM patients`
)

// stopWhenCharged returns a context that is cancelled as soon as the ledger
// holds more than charges0 charges, or after fallback, whichever comes first.
func stopWhenCharged(t *testing.T, owner *sql.DB, charges0 int, fallback time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		deadline := time.Now().Add(fallback)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			var n int
			if err := owner.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err == nil && n > charges0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	return ctx, cancel
}

// A DP statement stopped after it was accepted (cancelled, or past its
// deadline, while it reads) keeps its charge, exactly once, and releases
// nothing: whether a statement is charged depends on the statement, the
// policy and the ledger, never on how long the read takes. (Until issue 22 a
// statement stopped while it read charged nothing, and a WHERE whose running
// time depended on one row gave one bit per statement for free.)
func TestStoppedAfterAcceptanceKeepsCharge(t *testing.T) {
	path, owner, read := slowClinic(t, 500000, slowQuery)
	t.Logf("one read: %v", read)
	a := openAnalyst(t, path)
	for _, stop := range []string{"cancel", "deadline"} {
		before := ledgerRows(t, owner)
		var ctx context.Context
		var cancel context.CancelFunc
		if stop == "cancel" {
			ctx, cancel = stopWhenCharged(t, owner, before, read/3)
		} else {
			ctx, cancel = context.WithTimeout(context.Background(), read/3)
		}
		_, rows, err := queryAll(ctx, a, fmt.Sprintf(slowQuery, 0.2))
		cancel()
		if err == nil {
			t.Errorf("%s: the statement answered (%d rows): it was not stopped", stop, len(rows))
		}
		if n := ledgerRows(t, owner) - before; n != 1 {
			t.Errorf("%s: a statement stopped after acceptance made %d charges, want exactly 1 (err %v)", stop, n, err)
		}
		var st *protect.Stopped
		if !errors.As(err, &st) || st.Receipt.ID == 0 || !strings.Contains(err.Error(), "keeps its charge") {
			t.Errorf("%s: error %v, want a *protect.Stopped naming the charge", stop, err)
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v does not wrap the context's", stop, err)
		}
	}
}

// A statement refused before acceptance charges nothing: a context already
// done, a refused statement, and one over budget, which is refused at once,
// without waiting for a read it never starts. (The scope holds Gaussian
// charges only, whose budget decision is quick: the time is the refusal's.)
func TestRefusedBeforeAcceptanceChargesNothing(t *testing.T) {
	path, owner, read := slowClinic(t, 1000000, countQuery)
	a := openAnalyst(t, path)
	before := ledgerRows(t, owner)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := queryAll(done, a, fmt.Sprintf(countQuery, 0.2)); err == nil {
		t.Error("a statement whose context was done before it started answered")
	}
	if _, _, err := queryAll(context.Background(), a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.2) pid, COUNT(*) FROM patients`); !protect.IsRefusal(err) {
		t.Errorf("refused statement: %v", err)
	}
	// SQLite cannot prepare it (substr takes at most 3 arguments): it fails
	// before it is charged.
	if _, _, err := queryAll(context.Background(), a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.2) COUNT(*) FROM patients WHERE substr(sex, 1, 2, 3) = 'F'`); err == nil || !strings.Contains(err.Error(), "nothing was charged") {
		t.Errorf("a statement SQLite cannot prepare: %v", err)
	}
	t0 := time.Now()
	_, _, err := queryAll(context.Background(), a, fmt.Sprintf(countQuery, 3.0))
	took := time.Since(t0)
	t.Logf("one read %v, the budget refusal %v", read, took)
	if !accountant.IsBudgetExceeded(err) {
		t.Errorf("over budget: %v", err)
	}
	if took > read/4 {
		t.Errorf("the budget refusal took %v, against %v for a read: it waited for the read", took, read)
	}
	if n := ledgerRows(t, owner); n != before {
		t.Errorf("%d charges from statements refused before acceptance", n-before)
	}
}
