package ext_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpsql/dpsql/vector"

	"github.com/dpsql/dpsql/ledger"

	"github.com/dpsql/dpsql/ext"
)

// A process killed with SIGKILL while its close checkpoints a release's
// large WAL itself (ext's checkpointBeforeClose, with the database file made
// durable as it is copied) leaves a file that passes integrity_check and whose
// ledger verifies, holding both the committed charge and the release table.
// The kill comes at several delays after the checkpoint starts; at least one
// must land while the WAL still exists, or the test did not test the window.
func TestKilledDuringCloseCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes; skipped in -short")
	}
	base := initDB(t, 10)
	db, err := ext.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE train(features BLOB, label INTEGER)`); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 256) // 12000 rows of 1 KB: a 12 MB release, above bigWAL
	for i := range 12000 {
		for j := range x {
			x[j] = float32((i*7+j)%13) / 13
		}
		if _, err := tx.Exec(`INSERT INTO train VALUES (?, ?)`, vector.Encode(x), i%2); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	midway := 0
	for _, delay := range []time.Duration{0, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond} {
		path := filepath.Join(t.TempDir(), "k.db")
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := child(t, "release-and-close", path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "CHECKPOINT\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child printed %q, %v; want CHECKPOINT (the close of a 12 MB release's WAL did not checkpoint it itself)", line, err)
		}
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(out)
		cmd.Wait()
		if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 && !strings.Contains(string(rest), "CLOSED") {
			midway++
		}
		if err := consistentWithRelease(path); err != nil {
			t.Errorf("killed %v after the checkpoint started: %v", delay, err)
		}
	}
	t.Logf("%d of 4 kills landed before the close removed the WAL", midway)
	if midway == 0 {
		t.Error("no kill landed before the close removed the WAL: the checkpoint window was not tested")
	}
}

// consistentWithRelease opens the file as an auditor would and checks it holds
// exactly one charge and the release table of 12000 rows, passes
// integrity_check and has a ledger that verifies.
func consistentWithRelease(path string) error {
	plain, err := sql.Open("sqlite3", path)
	if err != nil {
		return err
	}
	defer plain.Close()
	var ok string
	if err := plain.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("integrity_check: %q, %v", ok, err)
	}
	var charges, rows int
	if err := plain.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'charge'`).Scan(&charges); err != nil {
		return err
	}
	if err := plain.QueryRow(`SELECT count(*) FROM rel`).Scan(&rows); err != nil {
		return fmt.Errorf("the release table: %w (charges: %d)", err, charges)
	}
	if charges != 1 || rows != 12000 {
		return fmt.Errorf("%d charges and a release of %d rows; want 1 and 12000", charges, rows)
	}
	if _, err := ledger.Verify(context.Background(), plain); err != nil {
		return fmt.Errorf("the ledger does not verify: %w", err)
	}
	return nil
}
