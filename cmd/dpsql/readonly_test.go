package main

import (
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// asDpsqlEnv, set to 1, makes the test binary run its arguments as the dpsql
// command (see TestMain): the read-only tests run a copy of it as another user.
const asDpsqlEnv = "DPSQL_TEST_AS_DPSQL"

// unprivileged returns a function running the dpsql command, as a user who
// cannot write files they do not own: this process's user when it is not
// root, else nobody (uid and gid 65534, through setpriv). The command is a copy
// of the test binary in a world-readable directory.
func unprivileged(t *testing.T) func(args ...string) result {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("unavailable here: the read-only tests change users and file modes the Linux way")
	}
	dir := worldReadableDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dpsql")
	copyFile(t, self, bin, 0o755)
	var prefix []string
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("running as root under CI without setpriv (util-linux): file modes do not bind root, so the read-only tests need another user")
			}
			t.Skip("running as root without setpriv (util-linux, outside CI): file modes do not bind root, so the read-only tests need another user")
		}
		prefix = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	return func(args ...string) result {
		t.Helper()
		argv := append(slices.Clone(prefix), bin)
		argv = append(argv, args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = []string{asDpsqlEnv + "=1", "HOME=/nonexistent", "XDG_CONFIG_HOME=/nonexistent", "PATH=/usr/bin:/bin"}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running %v: %v", argv, err)
		}
		return result{code, out.String(), errb.String()}
	}
}

// worldReadableDir returns a new directory that every user can read and
// enter, removed at the end of the test.
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dpsql-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755) // let RemoveAll into directories made read-only
			}
			return nil
		})
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// listing describes every file of dir: name, size, mode and modification
// time, to show that a read-only command created or changed nothing.
func listing(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %v %s\n", e.Name(), fi.Size(), fi.Mode(), fi.ModTime().Format("15:04:05.000000000"))
	}
	return b.String()
}

// lockDown makes dir and every file in it read-only for everyone.
func lockDown(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
}

// plainDB opens path with go-sqlite3 alone (no dpsql, no journal mode set).
func plainDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func journalMode(t *testing.T, path string) string {
	t.Helper()
	db := plainDB(t, path)
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return mode
}

// readOnlyLedger creates, in a new world-readable directory, a database with
// a ledger of 4 rows (2 budget events, 2 charges) and returns its path.
func readOnlyLedger(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(worldReadableDir(t), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "ledger.db")
	mustRun(t, "init", db, "--mu", "1")
	mustRun(t, "init", db, "--mu", "1", "--scope", "b")
	mustRun(t, "query", db, `CREATE TABLE t(x REAL); INSERT INTO t VALUES (1), (2), (3);
SELECT dp_gaussian(count(*), 1, 0.5) FROM t;
SELECT dp_gaussian(1.0, 2, 0.5) AS second`)
	return db
}

// fileHeaderModes returns bytes 18 and 19 of a database file's header: 1, 1
// in rollback-journal mode, 2, 2 in WAL mode.
func fileHeaderModes(t *testing.T, path string) [2]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 20 {
		t.Fatalf("reading %s: %v", path, err)
	}
	return [2]byte{b[18], b[19]}
}

// TestReadOnlyAudit runs budget, audit, audit verify, audit head and export as a user
// who can write neither the file nor its directory, on a rollback-journal
// file, a WAL file whose -wal and -shm are present (another process holds it
// open, with a commit not yet checkpointed), and a WAL file without -shm; the
// directory's listing (names, sizes, modes, times) must not change.
func TestReadOnlyAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("-short skips the multi-process tests")
	}
	as := unprivileged(t)

	// auditAll runs the four read-only commands with extra arguments and
	// checks what each prints for a ledger of rows rows.
	auditAll := func(t *testing.T, db string, rows int, muSpent string, extra ...string) {
		t.Helper()
		dir := filepath.Dir(db)
		before := listing(t, dir)
		for _, args := range [][]string{
			{"budget", db, "-f", "csv"},
			{"audit", db, "-f", "csv"},
			{"audit", "verify", db},
			{"audit", "head", db},
			{"export", db, "t", "--raw", "--format", "csv"},
		} {
			r := as(append(args, extra...)...)
			if r.code != 0 {
				t.Fatalf("dpsql %s as an unprivileged user: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
			var want string
			switch args[0] + " " + args[1] {
			case "budget " + db:
				want = "default,1," + muSpent // a prefix of the figure
			case "audit " + db:
				want = fmt.Sprintf("\n%d,", rows)
			case "audit verify":
				want = fmt.Sprintf("ledger OK: %d rows, chain intact", rows)
			case "audit head":
				want = fmt.Sprintf("%d:", rows)
			case "export " + db:
				want = "x\n1\n2\n3\n"
			}
			if !strings.Contains(r.stdout, want) {
				t.Errorf("dpsql %s printed\n%s\nwant it to contain %q", strings.Join(args, " "), r.stdout, want)
			}
		}
		if after := listing(t, dir); after != before {
			t.Errorf("a read-only audit changed the directory:\nbefore:\n%safter:\n%s", before, after)
		}
	}

	t.Run("rollback journal", func(t *testing.T) {
		db := readOnlyLedger(t)
		if _, err := plainDB(t, db).Exec(`PRAGMA journal_mode = DELETE`); err != nil {
			t.Fatal(err)
		}
		lockDown(t, filepath.Dir(db))
		// The user really cannot write: a plain write fails.
		if r := as("query", db, "CREATE TABLE x(a)"); r.code == 0 {
			t.Fatalf("the unprivileged user wrote to a read-only file; the test cannot show anything: %+v", r)
		}
		auditAll(t, db, 4, "0.7071067811865476")
		if m := fileHeaderModes(t, db); m != [2]byte{1, 1} {
			t.Fatalf("reading converted the file: header bytes 18-19 = %v, want rollback mode 1, 1", m)
		}
	})

	t.Run("WAL with -wal and -shm", func(t *testing.T) {
		db := readOnlyLedger(t)
		holder := plainDB(t, db) // another process keeping the file open
		if _, err := holder.Exec(`PRAGMA wal_autocheckpoint = 0; SELECT count(*) FROM sqlite_schema`); err != nil {
			t.Fatal(err)
		}
		mustRun(t, "query", db, `SELECT gdp_spend(0.1)`) // row 5, only in the -wal
		for _, f := range []string{db + "-wal", db + "-shm"} {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("the setup lacks %s: %v", f, err)
			}
		}
		lockDown(t, filepath.Dir(db))
		auditAll(t, db, 5, "0.71414284285428") // sqrt(0.51), to its last digit but one: charges extend mu_spent by math.Hypot
	})

	t.Run("WAL without -shm", func(t *testing.T) {
		db := readOnlyLedger(t)
		if m := fileHeaderModes(t, db); m != [2]byte{2, 2} {
			t.Fatalf("header bytes 18-19 = %v, want WAL mode 2, 2", m)
		}
		for _, f := range []string{db + "-wal", db + "-shm"} {
			if _, err := os.Stat(f); err == nil {
				t.Fatalf("the setup left %s", f)
			}
		}
		lockDown(t, filepath.Dir(db))
		before := listing(t, filepath.Dir(db))
		r := as("audit", "verify", db)
		if r.code != 1 || !strings.Contains(r.stderr, "WAL mode") || !strings.Contains(r.stderr, "add --immutable") {
			t.Fatalf("audit verify of a WAL file without -shm in a read-only directory: exit %d, stderr %q; want exit 1 and a message saying to add --immutable", r.code, r.stderr)
		}
		if after := listing(t, filepath.Dir(db)); after != before {
			t.Errorf("a failed read-only open changed the directory:\nbefore:\n%safter:\n%s", before, after)
		}
		auditAll(t, db, 4, "0.7071067811865476", "--immutable")
	})

	// A -wal file holding a commit but no -shm (a copy taken while a process
	// had the file open): an immutable reader would ignore the -wal and miss
	// the commit, so --immutable refuses too, saying what to do.
	t.Run("WAL with -wal but no -shm", func(t *testing.T) {
		src := readOnlyLedger(t)
		holder := plainDB(t, src)
		if _, err := holder.Exec(`PRAGMA wal_autocheckpoint = 0; SELECT count(*) FROM sqlite_schema`); err != nil {
			t.Fatal(err)
		}
		mustRun(t, "query", src, `SELECT gdp_spend(0.1)`)
		dir := filepath.Join(worldReadableDir(t), "copy")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, "ledger.db")
		copyFile(t, src, db, 0o644)
		copyFile(t, src+"-wal", db+"-wal", 0o644)
		lockDown(t, dir)
		before := listing(t, dir)
		for _, c := range []struct{ flag, want string }{
			{"--immutable=false", "add --immutable"},
			{"--immutable", "PRAGMA wal_checkpoint(TRUNCATE)"},
		} {
			r := as("audit", "verify", db, c.flag)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("audit verify %s of a WAL file with -wal but no -shm: exit %d, stderr %q; want exit 1 and %q", c.flag, r.code, r.stderr, c.want)
			}
		}
		if after := listing(t, dir); after != before {
			t.Errorf("a failed read-only open changed the directory:\nbefore:\n%safter:\n%s", before, after)
		}
	})
}

// TestReadingKeepsJournalMode: budget, audit, audit verify and audit head on a
// writable rollback-journal file leave it in rollback mode (a charging open
// switches it to WAL; a reading one must not).
func TestReadingKeepsJournalMode(t *testing.T) {
	db := ledgerDB(t)
	if _, err := plainDB(t, db).Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"budget", db}, {"audit", db}, {"audit", "verify", db}, {"audit", "head", db}} {
		mustRun(t, args...)
		if m := fileHeaderModes(t, db); m != [2]byte{1, 1} {
			t.Fatalf("dpsql %s converted the file: header bytes 18-19 = %v, want rollback mode 1, 1", strings.Join(args, " "), m)
		}
	}
	mustRun(t, "query", db, "SELECT gdp_spend(0.1)")
	if m := fileHeaderModes(t, db); m != [2]byte{2, 2} {
		t.Fatalf("a charge left the file in mode %v, want WAL 2, 2", m)
	}
}
