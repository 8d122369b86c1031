package hostsql

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Config is what a connection of the driver is opened with.
type Config struct {
	// API is the extension API table (a const sqlite3_api_routines*) every
	// call goes through: the host's in a loadable extension.
	API unsafe.Pointer
	// Name is the database as sqlite3_open_v2 reads it with SQLITE_OPEN_URI:
	// a file name or a file: URI, whose own parameters (mode=ro, vfs=, ...)
	// SQLite interprets.
	Name string
	// VFS names the VFS to open the file through ("" for the default): a
	// loadable extension passes its host's (see [VFSName]), so that one
	// SQLite and one VFS lock the file.
	VFS string
	// TxLock is how Begin starts a transaction: "deferred" (the default),
	// "immediate" or "exclusive".
	TxLock string
	// BusyTimeout is how long a statement waits for a lock another
	// connection holds before failing with SQLITE_BUSY (5 s by default, as
	// go-sqlite3's).
	BusyTimeout time.Duration
	// ForeignKeys, when set, turns foreign-key enforcement on or off on
	// every new connection.
	ForeignKeys *bool
	// JournalMode, when set, is run as PRAGMA journal_mode on every new
	// connection: DELETE, TRUNCATE, PERSIST, MEMORY, WAL or OFF.
	JournalMode string
	// Synchronous, when set, is run as PRAGMA synchronous on every new
	// connection: OFF, NORMAL, FULL or EXTRA.
	Synchronous string
	// RequireWAL makes a new connection fail with an error wrapping
	// [ErrNotWAL] unless the file is in WAL mode, instead of converting it.
	RequireWAL bool
}

// defaultBusyTimeout is go-sqlite3's.
const defaultBusyTimeout = 5 * time.Second

// The DSN parameters the driver reads (go-sqlite3's names for the same
// settings, so that a DSN written for go-sqlite3 opens the same way), each
// with its short alias.
var dsnParams = map[string]string{
	"_txlock":       "_txlock",
	"_busy_timeout": "_busy_timeout", "_timeout": "_busy_timeout",
	"_foreign_keys": "_foreign_keys", "_fk": "_foreign_keys",
	"_journal_mode": "_journal_mode", "_journal": "_journal_mode",
	"_synchronous": "_synchronous", "_sync": "_synchronous",
	"_require_wal": "_require_wal",
}

// ParseDSN reads a DSN in go-sqlite3's form: a file name or file: URI, then
// optionally ? and parameters. The parameters starting with an underscore are
// the driver's: _txlock (deferred, immediate, exclusive), _busy_timeout or
// _timeout (milliseconds), _foreign_keys or _fk (a boolean), _journal_mode
// or _journal, _synchronous or _sync (a name or 0-3), and _require_wal (a
// boolean, see [Config]). The others are SQLite's URI parameters and stay in
// Name; they need a file: URI. API and VFS are not part of a DSN.
func ParseDSN(dsn string) (Config, error) {
	c := Config{Name: dsn, BusyTimeout: defaultBusyTimeout}
	i := strings.IndexByte(dsn, '?')
	if i < 0 {
		return c, checkName(c.Name)
	}
	c.Name = dsn[:i]
	q, err := url.ParseQuery(dsn[i+1:])
	if err != nil {
		return Config{}, fmt.Errorf("hostsql: DSN %q: bad parameters: %w", dsn, err)
	}
	rest := url.Values{}
	seen := map[string]string{}
	for k, vs := range q {
		canon, ours := dsnParams[k]
		if !strings.HasPrefix(k, "_") {
			rest[k] = vs
			continue
		}
		if !ours {
			return Config{}, fmt.Errorf("hostsql: DSN parameter %q is not one the driver knows (%s)", k, knownParams())
		}
		if prev, dup := seen[canon]; dup || len(vs) != 1 {
			if !dup {
				prev = k
			}
			return Config{}, fmt.Errorf("hostsql: DSN parameter %s is given more than once (as %s and %s)", canon, prev, k)
		}
		seen[canon] = k
		if err := c.set(canon, vs[0]); err != nil {
			return Config{}, fmt.Errorf("hostsql: DSN parameter %s=%q: %w", k, vs[0], err)
		}
	}
	if len(rest) > 0 {
		if !strings.HasPrefix(c.Name, "file:") {
			return Config{}, fmt.Errorf("hostsql: DSN %q: SQLite's parameters (%s) need a file: URI, as in file:%s?...", dsn, strings.Join(sortedKeys(rest), ", "), c.Name)
		}
		c.Name += "?" + rest.Encode()
	}
	return c, checkName(c.Name)
}

func checkName(name string) error {
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("hostsql: the database name %q holds a NUL byte", name)
	}
	return nil
}

func knownParams() string {
	var ks []string
	for k := range dsnParams {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "known: " + strings.Join(ks, ", ")
}

func sortedKeys(v url.Values) []string {
	var ks []string
	for k := range v {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (c *Config) set(param, v string) error {
	switch param {
	case "_txlock":
		switch l := strings.ToLower(v); l {
		case "deferred", "immediate", "exclusive":
			c.TxLock = l
		default:
			return fmt.Errorf("want deferred, immediate or exclusive")
		}
	case "_busy_timeout":
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt32 {
			return fmt.Errorf("want a whole number of milliseconds from 0 to %d", math.MaxInt32)
		}
		c.BusyTimeout = time.Duration(ms) * time.Millisecond
	case "_foreign_keys":
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		c.ForeignKeys = &b
	case "_journal_mode":
		switch u := strings.ToUpper(v); u {
		case "DELETE", "TRUNCATE", "PERSIST", "MEMORY", "WAL", "OFF":
			c.JournalMode = u
		default:
			return fmt.Errorf("want DELETE, TRUNCATE, PERSIST, MEMORY, WAL or OFF")
		}
	case "_synchronous":
		switch u := strings.ToUpper(v); u {
		case "OFF", "0":
			c.Synchronous = "OFF"
		case "NORMAL", "1":
			c.Synchronous = "NORMAL"
		case "FULL", "2":
			c.Synchronous = "FULL"
		case "EXTRA", "3":
			c.Synchronous = "EXTRA"
		default:
			return fmt.Errorf("want OFF, NORMAL, FULL, EXTRA or 0-3")
		}
	case "_require_wal":
		b, err := parseBool(v)
		if err != nil {
			return err
		}
		c.RequireWAL = b
	}
	return nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "on":
		return true, nil
	case "0", "no", "false", "off":
		return false, nil
	}
	return false, fmt.Errorf("want a boolean (1, yes, true, on; 0, no, false, off)")
}

// FormatDSN writes c (but its API and VFS) as a DSN that [ParseDSN] reads
// back to c.
func (c Config) FormatDSN() string {
	q := url.Values{}
	if c.TxLock != "" {
		q.Set("_txlock", c.TxLock)
	}
	q.Set("_busy_timeout", strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10))
	if c.ForeignKeys != nil {
		q.Set("_foreign_keys", map[bool]string{true: "1", false: "0"}[*c.ForeignKeys])
	}
	if c.JournalMode != "" {
		q.Set("_journal_mode", c.JournalMode)
	}
	if c.Synchronous != "" {
		q.Set("_synchronous", c.Synchronous)
	}
	if c.RequireWAL {
		q.Set("_require_wal", "1")
	}
	sep := "?"
	if strings.Contains(c.Name, "?") {
		sep = "&"
	}
	return c.Name + sep + q.Encode()
}
