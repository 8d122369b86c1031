package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalystAddTokenFile: `dpsql analyst add ... > alice.token` leaves the
// token in a file readable by its owner only (so --token-file does not warn),
// and the message does not point "above" at a terminal that shows nothing.
func TestAnalystAddTokenFile(t *testing.T) {
	db := newDB(t)
	path := filepath.Join(t.TempDir(), "alice.token")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644) // as a shell's > makes it
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: f, Stderr: &stderr}
	code := m.Exec(context.Background(), []string{"analyst", "add", db, "alice", "--scope", "default"})
	f.Close()
	if code != 0 {
		t.Fatalf("analyst add: exit %d: %s", code, stderr.String())
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("the token file has mode %v, want -rw-------", perm)
	}
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "dpsql_at_") {
		t.Errorf("the token file holds %q", b)
	}
	msg := stderr.String()
	if strings.Contains(msg, "above") || !strings.Contains(msg, "readable by you only") || !strings.Contains(msg, "shown only this once") {
		t.Errorf("analyst add to a file said %q", msg)
	}

	r := run(t, "", "analyst", "add", db, "bob", "--scope", "default") // standard output not a file
	if r.code != 0 || strings.Contains(r.stderr, "above") || !strings.Contains(r.stderr, "its token, written to standard output, is shown only this once") {
		t.Errorf("analyst add to a buffer: exit %d, stderr %q", r.code, r.stderr)
	}
}
