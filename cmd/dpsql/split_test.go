package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitSQL(t *testing.T) {
	for _, tc := range []struct {
		in    string
		stmts []string
		rest  string
	}{
		{"", nil, ""},
		{"SELECT 1", nil, "SELECT 1"},
		{"SELECT 1;", []string{"SELECT 1;"}, ""},
		{"  SELECT 1 ; SELECT 2;\n", []string{"SELECT 1 ;", "SELECT 2;"}, ""},
		{";;; SELECT 1;;", []string{"SELECT 1;"}, ""},
		{"SELECT 'a;b'; SELECT \"x;\"", []string{"SELECT 'a;b';"}, "SELECT \"x;\""},
		{"SELECT 'it''s;'; SELECT [a;b], `c;d`;", []string{"SELECT 'it''s;';", "SELECT [a;b], `c;d`;"}, ""},
		{"-- a comment; still\nSELECT 1; /* x; */ SELECT 2; -- end", []string{"SELECT 1;", "SELECT 2;"}, ""},
		{"SELECT 'open;", nil, "SELECT 'open;"},
		{"SELECT 1; /* open; comment", []string{"SELECT 1;"}, "/* open; comment"},
		{"SELECT 1 /* x */", nil, "SELECT 1 /* x */"},
		{"CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); UPDATE c SET x = 1; END; SELECT 3;",
			[]string{"CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); UPDATE c SET x = 1; END;", "SELECT 3;"}, ""},
		{"create temp trigger t after insert on a begin select 1; end", nil, "create temp trigger t after insert on a begin select 1; end"},
		{"CREATE TABLE end_(x); SELECT end_ FROM t;", []string{"CREATE TABLE end_(x);", "SELECT end_ FROM t;"}, ""},
		{"EXPLAIN CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; END;", []string{"EXPLAIN CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; END;"}, ""},
		{"SELECT dp_gaussian(count(*), 1, 0.5) FROM t;", []string{"SELECT dp_gaussian(count(*), 1, 0.5) FROM t;"}, ""},
		// A DP statement after its CTEs is one statement (issue 25).
		{"WITH a AS (SELECT pid FROM p WHERE x <> ';') SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a; SELECT 2;",
			[]string{"WITH a AS (SELECT pid FROM p WHERE x <> ';') SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM a;",
				"SELECT 2;"}, ""},
	} {
		stmts, rest := splitSQL(tc.in)
		if !reflect.DeepEqual(stmts, tc.stmts) || rest != tc.rest {
			t.Errorf("splitSQL(%q) = %q, %q; want %q, %q", tc.in, stmts, rest, tc.stmts, tc.rest)
		}
	}
}

// FuzzSplitSQL checks that splitting never panics, keeps the statements in
// order as substrings of the input, and that each statement splits to itself.
func FuzzSplitSQL(f *testing.F) {
	for _, s := range []string{"SELECT 1; SELECT 'a;b';", "CREATE TRIGGER t BEGIN x; END; y;", "/* a */ -- b\n;", "[;`;\";'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		stmts, rest := splitSQL(in)
		pos := 0
		for _, s := range stmts {
			k := strings.Index(in[pos:], s)
			if k < 0 {
				t.Fatalf("statement %q not found in order in %q", s, in)
			}
			pos += k + len(s)
			if !strings.HasSuffix(s, ";") {
				t.Fatalf("statement %q lacks its semicolon", s)
			}
			again, r := splitSQL(s)
			if len(again) != 1 || again[0] != s || r != "" {
				t.Fatalf("statement %q re-splits to %q, %q", s, again, r)
			}
		}
		if rest != "" && !strings.HasSuffix(in, rest) {
			t.Fatalf("rest %q is not a suffix of %q", rest, in)
		}
	})
}
