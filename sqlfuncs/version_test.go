package sqlfuncs_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// A SQLite older than 3.34.0 (no sqlite3_txn_state) is refused by name.
func TestCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		v    int
		want string // "" when accepted
	}{
		{3033000, "this SQLite is version 3.33.0; dpsql needs SQLite 3.34.0 or later"},
		{3007017, "version 3.7.17;"},
		{3034000, ""},
		{3040001, ""},
		{3054001, ""},
	} {
		err := sqlfuncs.CheckVersion(tt.v)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckVersion(%d) = %v, want %q", tt.v, err, tt.want)
		}
	}
}

// A function sees its statement's interrupt (a cancelled context makes
// go-sqlite3 call sqlite3_interrupt) with any SQLite dpsql accepts: through
// sqlite3_is_interrupted from 3.41, through a probe statement before (the
// Debian 12 system SQLite of the libsqlite3 build tag, 3.40.1). The probes
// are not counted as statement runs (LastError relies on the count).
func TestInterruptSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "int.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var version string
	var number int
	if err := db.QueryRow(`SELECT sqlite_version(), sqlite_source_id()`).Scan(&version, new(string)); err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.SplitN(version+".0.0", ".", 4)[:3] {
		n := 0
		for _, r := range p {
			n = n*10 + int(r-'0')
		}
		number = number*1000 + n
	}
	if got, want := sqlfuncs.CanPollInterrupts(), number >= 3041000; got != want {
		t.Errorf("SQLite %s: sqlite3_is_interrupted used = %v, want %v", version, got, want)
	}
	t.Logf("SQLite %s, sqlite3_is_interrupted used: %v", version, sqlfuncs.CanPollInterrupts())
	seen := make(chan [2]bool, 1)
	if n, err := sqlfuncs.RegisterInterruptWatch(path, seen); err != nil || n != 1 {
		t.Fatalf("registering t_watch: %d connections, %v", n, err)
	}

	// Not interrupted: the watch runs out.
	if _, err := db.Exec(`SELECT t_watch(30)`); err != nil {
		t.Fatal(err)
	}
	if s := <-seen; s[0] || !s[1] {
		t.Errorf("no interrupt: seen %v, run count unchanged %v", s[0], s[1])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	// (The statement itself may still succeed: SQLite checks the interrupt
	// at its loops, and this one has none left after the call.)
	db.ExecContext(ctx, `SELECT t_watch(10000)`)
	took := time.Since(start)
	s := <-seen
	if !s[0] || !s[1] {
		t.Errorf("interrupted: seen %v, run count unchanged %v", s[0], s[1])
	}
	if took > 5*time.Second {
		t.Errorf("the interrupted call returned after %v", took)
	}
	// The connection runs statements normally afterwards.
	if _, err := db.Exec(`SELECT t_watch(1)`); err != nil {
		t.Fatal(err)
	}
	if s := <-seen; s[0] {
		t.Errorf("the next statement's function sees an interrupt")
	}
}
