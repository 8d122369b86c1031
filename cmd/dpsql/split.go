package main

import (
	"strings"

	"github.com/dpsql/dpsql/internal/sqllex"
)

// splitSQL splits text into complete statements the way SQLite's
// sqlite3_complete() delimits them (sqllex.Split): each statement starts at
// its first token and ends with its semicolon; rest is an incomplete last
// statement or an unterminated string, identifier or comment, else "".
func splitSQL(text string) (stmts []string, rest string) { return sqllex.Split(text) }

// onlyComment reports whether an incomplete rest holds no statement, only an
// unterminated block comment.
func onlyComment(rest string) bool { return strings.HasPrefix(rest, "/*") }
