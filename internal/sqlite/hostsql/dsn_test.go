package hostsql

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseDSN(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		dsn  string
		want Config
		err  string
	}{
		{dsn: "a.db", want: Config{Name: "a.db", BusyTimeout: 5 * time.Second}},
		{dsn: "file:/x/l%20d.db?_txlock=immediate&_busy_timeout=30000&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=1",
			want: Config{Name: "file:/x/l%20d.db", TxLock: "immediate", BusyTimeout: 30 * time.Second, JournalMode: "WAL", Synchronous: "FULL", ForeignKeys: &on}},
		{dsn: "file:a.db?mode=ro&_fk=off&_sync=1&_timeout=0&_journal=wal&_require_wal=yes",
			want: Config{Name: "file:a.db?mode=ro", ForeignKeys: &off, Synchronous: "NORMAL", JournalMode: "WAL", RequireWAL: true}},
		{dsn: "file:a.db?vfs=unix-dotfile&mode=rw", want: Config{Name: "file:a.db?mode=rw&vfs=unix-dotfile", BusyTimeout: 5 * time.Second}},
		{dsn: "a.db?_txlock=EXCLUSIVE", want: Config{Name: "a.db", TxLock: "exclusive", BusyTimeout: 5 * time.Second}},
		{dsn: "a.db?mode=ro", err: "need a file: URI"},
		{dsn: "a.db?_loc=auto", err: `"_loc" is not one the driver knows`},
		{dsn: "a.db?_txlock=later", err: "want deferred, immediate or exclusive"},
		{dsn: "a.db?_busy_timeout=-1", err: "whole number of milliseconds"},
		{dsn: "a.db?_busy_timeout=99999999999", err: "whole number of milliseconds"},
		{dsn: "a.db?_fk=maybe", err: "want a boolean"},
		{dsn: "a.db?_journal_mode=fast", err: "want DELETE"},
		{dsn: "a.db?_sync=4", err: "want OFF"},
		{dsn: "a.db?_fk=1&_foreign_keys=0", err: "more than once"},
		{dsn: "a.db?_fk=1&_fk=1", err: "more than once"},
		{dsn: "a.db?_fk=%zz", err: "bad parameters"},
		{dsn: "a\x00b.db", err: "NUL byte"},
	} {
		got, err := ParseDSN(tc.dsn)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDSN(%q) error = %v, want one saying %q", tc.dsn, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", tc.dsn, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseDSN(%q) = %+v, want %+v", tc.dsn, got, tc.want)
		}
	}
}

// FuzzParseDSN: any DSN is parsed or refused with an error, never a panic;
// what parses prints back (FormatDSN) to a DSN that parses to the same
// Config.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"a.db", "file:x.db?_txlock=immediate&_busy_timeout=30000&_journal_mode=WAL&_synchronous=FULL&_foreign_keys=1",
		"file:a?mode=ro&vfs=unix&_fk=0", "?", "file:?&&=", "a?_require_wal=on", "file:%41?x=%26"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		c, err := ParseDSN(dsn)
		if err != nil {
			return
		}
		back := c.FormatDSN()
		c2, err := ParseDSN(back)
		if err != nil {
			t.Fatalf("ParseDSN(%q) = %+v, printed %q, which fails: %v", dsn, c, back, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("ParseDSN(%q) = %+v, printed %q, which parses to %+v", dsn, c, back, c2)
		}
	})
}
