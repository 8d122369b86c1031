package ledger

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/internal/sqlite/hostsql"
	"github.com/dpsql/dpsql/internal/sqlite/linked"
)

// hostOpener opens ledgers as the loadable extension dp0 does: through an
// API table (here the one of the SQLite go-sqlite3 links), with hostsql
// reading LedgerDSN, on the file's own VFS.
func hostOpener(t *testing.T) Opener {
	api, err := linked.API()
	if err != nil {
		t.Fatal(err)
	}
	return func(path string) (*sql.DB, error) {
		c, err := (&hostsql.Driver{API: api, VFS: "unix"}).OpenConnector(LedgerDSN(path))
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}
}

// The ledger's tests, run again with the ledger's connection opened through
// internal/sqlite/hostsql instead of go-sqlite3: the ledger behaves the same on the
// driver dp0 gives it. (TestLedgerV1Fixture, half a minute of migrations,
// is left to UpgradeVersion0File here.)
func TestLedgerOverHostSQL(t *testing.T) {
	SetOpener(hostOpener(t))
	t.Cleanup(func() { SetOpener(nil) })
	for name, test := range map[string]func(*testing.T){
		"ChargeStopsExactlyAtBudget":    TestChargeStopsExactlyAtBudget,
		"ChargeStatusFigures":           TestChargeStatusFigures,
		"FailedReleaseChargesNothing":   TestFailedReleaseChargesNothing,
		"LedgerIsAppendOnly":            TestLedgerIsAppendOnly,
		"VerifyCatchesTampering":        TestVerifyCatchesTampering,
		"ScopesAndErrors":               TestScopesAndErrors,
		"IsBudgetExceededAndCodes":      TestIsBudgetExceededAndCodes,
		"AppendRecords":                 TestAppendRecords,
		"AppendRefusals":                TestAppendRefusals,
		"ForgedRecordBreaksTheChain":    TestForgedRecordBreaksTheChain,
		"FileTotalAndCap":               TestFileTotalAndCap,
		"AddRemoveCapRefusesReplaceOne": TestAddRemoveCapRefusesReplaceOne,
		"NewScopeKeepsTotalVerifiable":  TestNewScopeKeepsTotalVerifiable,
		"UpgradeVersion0File":           TestUpgradeVersion0File,
		"VerifyNoisePayload":            TestVerifyNoisePayload,
		"ChargeQuote":                   TestChargeQuote,
		"SecondBudgetEventRefused":      TestSecondBudgetEventRefused,
		"DetailsCannotChangeAccounting": TestDetailsCannotChangeTheAccounting,
		"VersionSetBackFailsVerify":     TestVersionSetBackFailsVerify,
		"CopiedInCheaperState":          TestCopiedInCheaperStateCannotLetAChargeThrough,
		"RaisedBudget":                  TestRaisedBudgetCannotLetAChargeThrough,
		"VerifyHead":                    TestVerifyHead,
		"VerifyChecksTriggers":          TestVerifyChecksTriggers,
		"WriteConflictIsReportedAsSuch": testWriteConflict,
		"LedgerConnectionIsHostSQLs":    testLedgerIsHostSQL,
	} {
		t.Run(name, test)
	}
}

// testLedgerIsHostSQL checks that the opener is in use (a test of the
// wiring, without which the subtests above would prove nothing new).
func testLedgerIsHostSQL(t *testing.T) {
	l, _, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	if _, ok := l.db.Driver().(*hostsql.Driver); !ok {
		t.Fatalf("the ledger's driver is %T, want hostsql's", l.db.Driver())
	}
}

// testWriteConflict: while another connection holds the file's write lock,
// a charge waits its busy timeout and fails as a write conflict, charging
// nothing.
func testWriteConflict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conflict.db")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := l.Init(ctx, mustBudget(t, "default", 1, 0, 1e-5)); err != nil {
		t.Fatal(err)
	}
	api, _ := linked.API()
	c, err := (&hostsql.Driver{API: api}).OpenConnector("file:" + path + "?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	other := sql.OpenDB(c)
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A shorter wait than the ledger's 30 s: its pool's one connection is
	// replaced by one with a 100 ms busy timeout.
	l.db.Close()
	c2, err := (&hostsql.Driver{API: api}).OpenConnector(strings.Replace(LedgerDSN(path), "_busy_timeout=30000", "_busy_timeout=100", 1))
	if err != nil {
		t.Fatal(err)
	}
	l.db = sql.OpenDB(c2)
	_, err = l.Charge(ctx, gauss(0.1), nil)
	if !errors.Is(err, ErrWriteConflict) || !errors.Is(err, hostsql.ErrBusy) {
		t.Fatalf("charge under another's write lock: %v, want ErrWriteConflict wrapping SQLITE_BUSY", err)
	}
	tx.Rollback()
	st, err := l.Remaining(ctx, "default")
	if err != nil || st.Entries != 0 {
		t.Errorf("after the conflict: %+v, %v; want nothing charged", st, err)
	}
	if _, err := l.Charge(ctx, gauss(0.1), nil); err != nil {
		t.Errorf("charge once the lock is free: %v", err)
	}
}
