package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// holdWriteLock is the body of the helper process of TestLockWaitMessage: it
// takes the write lock of the database at path, says "locked" and keeps the
// lock until its standard input closes.
func holdWriteLock(path string) {
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	conn.ExecContext(ctx, `ROLLBACK`)
	conn.Close()
}

// TestLockWaitMessage runs a DP query while another process holds the
// database's write lock: after a second the command says so, naming the
// process, and the query completes once the lock is released.
func TestLockWaitMessage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("unavailable here: the lock holder is read from /proc/locks, which only Linux has")
	}
	if testing.Short() {
		t.Skip("-short skips the multi-process tests")
	}
	db := newDB(t)
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "DPSQL_TEST_HOLD_LOCK="+db)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the lock holder said %q", line)
	}

	var out, errb lockedBuffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- m.Exec(context.Background(), []string{"query", db, "SELECT dp_gaussian(1, 1, 0.1) AS x", "-f", "csv"})
	}()
	want := fmt.Sprintf("dpsql: waiting for the write lock on %s, which process %d holds (dpsql gives up after 30 s; Ctrl-C stops now)\n", db, holder.Process.Pid)
	for errb.String() == "" && time.Since(start) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	waited := time.Since(start)
	if got := errb.String(); got != want {
		t.Fatalf("stderr after %v: %q, want %q", waited, got, want)
	}
	if waited < lockWaitDelay {
		t.Errorf("the message came after %v, before the %v delay", waited, lockWaitDelay)
	}
	if waited > 8*lockWaitDelay { // far below the 30 s of silence before
		t.Errorf("the message came only after %v", waited)
	}
	stdin.Close() // release the lock: the charge goes through
	if code := <-done; code != 0 {
		t.Fatalf("query: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(out.String(), "x\n") {
		t.Fatalf("query output %q", out.String())
	}
}

// TestLockHolderIn reads /proc/locks lines: only POSIX write locks on the
// -shm file that cover byte 120 and belong to another process count.
func TestLockHolderIn(t *testing.T) {
	locks := `1: POSIX  ADVISORY  WRITE 9979 fe:00:9979302 120 120
2: POSIX  ADVISORY  READ 9861 fe:00:9979302 120 120
3: POSIX  ADVISORY  WRITE 555 fe:00:1234 120 120
4: OFDLCK ADVISORY  WRITE -1 fe:00:9979302 120 120
5: POSIX  ADVISORY  WRITE 777 fe:00:9979302 121 128
`
	for _, tc := range []struct {
		dev  string
		ino  uint64
		self int
		want int
	}{
		{"fe:00", 9979302, 1, 9979},
		{"fe:00", 9979302, 9979, 0}, // our own lock: not a wait
		{"fe:00", 1234, 1, 555},
		{"fe:01", 1234, 1, 0},
		{"fe:00", 42, 1, 0},
	} {
		if got := lockHolderIn(locks, tc.dev, tc.ino, tc.self); got != tc.want {
			t.Errorf("lockHolderIn(%s:%d, self %d) = %d, want %d", tc.dev, tc.ino, tc.self, got, tc.want)
		}
	}
	if got := lockHolderIn("1: POSIX  ADVISORY  WRITE 9 fe:00:5 100 EOF\n", "fe:00", 5, 1); got != 9 {
		t.Errorf("a lock to EOF: %d, want 9", got)
	}
}
