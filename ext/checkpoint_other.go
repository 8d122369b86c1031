//go:build !linux

package ext

import sqlite3 "github.com/mattn/go-sqlite3"

// checkpointBeforeClose is Linux's early checkpoint of a large WAL
// (checkpoint_linux.go); elsewhere the close checkpoints as SQLite does.
func checkpointBeforeClose(*sqlite3.SQLiteConn) {}
