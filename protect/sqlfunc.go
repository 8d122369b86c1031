package protect

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// RegisterOwnerFuncs adds the owner's SQL functions to a curator connection:
//
//	dp_protect(table, policy_json)  record or replace a table's policy; returns the table's name
//	dp_unprotect(table)             remove a table's policy; returns the table's name
//
// policy_json has keys privacy_unit, max_groups, max_rows and bounds
// ({"col": [lo, hi]}), as json_object builds it. The change is written and
// committed on a connection of its own (like a ledger charge), so call these
// in a plain SELECT outside BEGIN ... COMMIT. Analyst connections refuse both.
func RegisterOwnerFuncs(sc *sqlite3.SQLiteConn) error {
	path := sc.GetFilename("main")
	if err := sc.RegisterFunc("dp_protect", func(table, policy string) (string, error) {
		p, err := ParsePolicy([]byte(policy))
		if err != nil {
			return "", fmt.Errorf("dp_protect: %w", err)
		}
		db, err := ownerDB(path)
		if err != nil {
			return "", fmt.Errorf("dp_protect: %w", err)
		}
		defer db.Close()
		if err := Protect(context.Background(), db, table, p); err != nil {
			return "", fmt.Errorf("dp_protect: %w", err)
		}
		return table, nil
	}, false); err != nil {
		return err
	}
	return sc.RegisterFunc("dp_unprotect", func(table string) (string, error) {
		db, err := ownerDB(path)
		if err != nil {
			return "", fmt.Errorf("dp_unprotect: %w", err)
		}
		defer db.Close()
		if err := Unprotect(context.Background(), db, table); err != nil {
			return "", fmt.Errorf("dp_unprotect: %w", err)
		}
		return table, nil
	}, false)
}

// ownerDB opens a writer on path for one policy change; the caller closes it.
func ownerDB(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("protected mode needs a database file")
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
