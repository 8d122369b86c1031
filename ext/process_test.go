package ext_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// The tests below re-run this test binary as child processes; TestMain sends a
// child to its role.
func TestMain(m *testing.M) {
	switch os.Getenv("DPSQL_TEST_CHILD") {
	case "print-and-hang":
		childPrintAndHang(os.Getenv("DPSQL_TEST_DB"))
	case "spend-until-refused":
		childSpend(os.Getenv("DPSQL_TEST_DB"))
	case "release-and-hang":
		childReleaseAndHang(os.Getenv("DPSQL_TEST_DB"))
	case "release-and-close":
		childReleaseAndClose(os.Getenv("DPSQL_TEST_DB"))
	default:
		os.Exit(m.Run())
	}
}

func childPrintAndHang(path string) {
	db, err := ext.Open(path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	var v float64
	if err := db.QueryRow(`SELECT dp_gaussian(100, 1, 0.5)`).Scan(&v); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("VALUE", v)
	time.Sleep(time.Hour) // killed by the parent
}

func childSpend(path string) {
	db, err := ext.Open(path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	// Wait for the common start time so that the processes really race.
	if ns, err := strconv.ParseInt(os.Getenv("DPSQL_TEST_START"), 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, ns)))
	}
	n := 0
	for {
		var v float64
		// gdp_spend: an exact mu = 0.1 spend with no sampler error, so that
		// exactly 100 fit (dp_gaussian's noise_tv is paid from delta).
		err := db.QueryRow(`SELECT gdp_spend(0.1)`).Scan(&v)
		if err != nil {
			if strings.Contains(err.Error(), "privacy budget exceeded") {
				fmt.Println("SPENT", n)
				os.Exit(0)
			}
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		n++
	}
}

// childReleaseAndHang starts a dp_avgmix release and, once it has written
// 4096 of its rows (inside the charge's transaction, with the WAL's early
// writeback under way), prints ROWS and stops there until it is killed.
func childReleaseAndHang(path string) {
	db, err := ext.Open(path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	sqlfuncs.SetProgress(func(fn string, done, total int) {
		if done >= 4096 && done < total {
			fmt.Println("ROWS", done)
			time.Sleep(time.Hour) // killed by the parent
		}
	})
	var out string
	err = db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 12000, 'classes', 2, 'into', 'rel', 'mu', 1.0, 'm', 16)) FROM train`).Scan(&out)
	fmt.Println("DONE", out, err)
	os.Exit(1)
}

// childReleaseAndClose runs a dp_avgmix release and closes the database,
// printing CHECKPOINT when the close starts its own checkpoint of the
// release's WAL (the parent kills it then) and CLOSED once closed.
func childReleaseAndClose(path string) {
	db, err := ext.Open(path)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ext.SetCheckpointStarted(func() { fmt.Println("CHECKPOINT") })
	var out string
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 12000, 'classes', 2, 'into', 'rel', 'mu', 1.0, 'm', 16)) FROM train`).Scan(&out); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	db.Close()
	fmt.Println("CLOSED")
	os.Exit(0)
}

// trainTable makes table train(features, label) of n rows of 256 floats in
// two classes.
func trainTable(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE train(features BLOB, label INTEGER)`); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 256)
	for i := range n {
		for j := range x {
			x[j] = float32((i*7+j)%13) / 13
		}
		if _, err := db.Exec(`INSERT INTO train VALUES (?, ?)`, vector.Encode(x), i%2); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFile fails t unless the file at path, read as an auditor would
// (go-sqlite3, the default VFS), holds wantCharges charges and the release
// table rel when wantRelease, its ledger verifies and it passes
// integrity_check.
func checkFile(t *testing.T, path string, wantCharges int, wantRelease bool) {
	t.Helper()
	plain, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var n, tables int
	if err := plain.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := plain.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'rel'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if n != wantCharges || (tables == 1) != wantRelease {
		t.Errorf("the file holds %d charges and %d release tables; want %d and %v", n, tables, wantCharges, wantRelease)
	}
	if _, err := ledger.Verify(context.Background(), plain); err != nil {
		t.Errorf("the ledger does not verify: %v", err)
	}
	var ok string
	if err := plain.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check: %q, %v", ok, err)
	}
}

func child(t *testing.T, role, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DPSQL_TEST_CHILD="+role, "DPSQL_TEST_DB="+path)
	return cmd
}

func initDB(t *testing.T, mu float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SELECT dp_init(?)`, mu); err != nil {
		t.Fatal(err)
	}
	return path
}

// A process killed with SIGKILL right after it printed a noisy value has its
// charge in the ledger.
func TestChargeSurvivesKillAfterPrint(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes; skipped in -short")
	}
	path := initDB(t, 1)
	cmd := child(t, "print-and-hang", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "VALUE ") {
		cmd.Process.Kill()
		t.Fatalf("child printed %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	db, err := sql.Open("sqlite3", path) // a plain connection, as an auditor would
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var mu float64
	if err := db.QueryRow(`SELECT count(*), coalesce(sum(mu), 0) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n, &mu); err != nil {
		t.Fatal(err)
	}
	if n != 1 || mu != 0.5 {
		t.Errorf("after SIGKILL the ledger has %d rows spending %v; want the one charge of mu = 0.5", n, mu)
	}
}

// A process killed in the middle of writing a release (the WAL holding part
// of it, written out early) leaves a consistent file: no charge, no release
// table, a ledger that verifies, and the same release then runs and charges
// once.
func TestReleaseKilledMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes; skipped in -short")
	}
	path := initDB(t, 10)
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	trainTable(t, db, 12000) // 12000 rows of 1 KB: a 12 MB release
	cmd := child(t, "release-and-hang", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ROWS ") {
		cmd.Process.Kill()
		t.Fatalf("child printed %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	checkFile(t, path, 0, false)
	var res string
	if err := db.QueryRow(`SELECT dp_avgmix(features, label, json_object('n', 12000, 'classes', 2, 'into', 'rel', 'mu', 1.0, 'm', 16)) FROM train`).Scan(&res); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM rel`).Scan(&rows); err != nil || rows != 12000 {
		t.Fatalf("the release after the crash has %d rows (%v), want 12000", rows, err)
	}
	checkFile(t, path, 1, true)
}

// Eight processes spending mu = 0.1 each at once stop exactly at a budget of
// mu = 1: 100 charges in all, never 101.
func TestConcurrentProcessesNeverOverspend(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes; skipped in -short")
	}
	path := initDB(t, 1)
	var wg sync.WaitGroup
	counts := make([]int, 8)
	errs := make([]error, 8)
	start := strconv.FormatInt(time.Now().Add(1500*time.Millisecond).UnixNano(), 10)
	for i := range counts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := child(t, "spend-until-refused", path)
			cmd.Env = append(cmd.Env, "DPSQL_TEST_START="+start)
			out, err := cmd.Output()
			s := strings.TrimSpace(string(out))
			if err != nil || !strings.HasPrefix(s, "SPENT ") {
				errs[i] = fmt.Errorf("child %d: %q %v", i, s, err)
				return
			}
			counts[i], errs[i] = strconv.Atoi(strings.TrimPrefix(s, "SPENT "))
		}(i)
	}
	wg.Wait()
	total := 0
	for i, c := range counts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += c
	}
	busy := 0
	for _, c := range counts {
		if c > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Logf("only %d process(es) charged; the race was weak", busy)
	}
	if total != 100 {
		t.Errorf("8 processes made %d charges of mu = 0.1 against a budget of 1 (per process %v), want exactly 100", total, counts)
	}
	db, _ := sql.Open("sqlite3", path)
	defer db.Close()
	var n int
	db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&n)
	if n != 100 {
		t.Errorf("ledger has %d charges, want 100", n)
	}
	t.Logf("charges per process: %v", counts)
}

// Closing the last connection closes the ledger connection too, so SQLite
// checkpoints the WAL and removes it, as with a plain database.
func TestCloseRemovesWAL(t *testing.T) {
	path := initDB(t, 1)
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	if err := db.QueryRow(`SELECT dp_gaussian(1, 1, 0.1)`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no WAL while open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); !os.IsNotExist(err) {
		t.Errorf("the WAL outlived the last connection (%v)", err)
	}
}
