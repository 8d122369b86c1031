package main

import "strings"

// Token classes and states of SQLite's sqlite3_complete() (complete.c), which
// decides where a statement ends: at a semicolon outside string literals,
// quoted identifiers and comments, except inside the body of a
// CREATE TRIGGER ... BEGIN ... END.
const (
	tkSEMI = iota
	tkWS
	tkOTHER
	tkEXPLAIN
	tkCREATE
	tkTEMP
	tkTRIGGER
	tkEND
)

var completeTrans = [8][8]uint8{
	//              SEMI WS OTHER EXPLAIN CREATE TEMP TRIGGER END
	/* 0 INVALID */ {1, 0, 2, 3, 4, 2, 2, 2},
	/* 1 START   */ {1, 1, 2, 3, 4, 2, 2, 2},
	/* 2 NORMAL  */ {1, 2, 2, 2, 2, 2, 2, 2},
	/* 3 EXPLAIN */ {1, 3, 3, 2, 4, 2, 2, 2},
	/* 4 CREATE  */ {1, 4, 2, 2, 2, 4, 5, 2},
	/* 5 TRIGGER */ {6, 5, 5, 5, 5, 5, 5, 5},
	/* 6 SEMI    */ {6, 6, 5, 5, 5, 5, 5, 7},
	/* 7 END     */ {1, 7, 5, 5, 5, 5, 5, 5},
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// splitSQL splits text into complete statements the way SQLite's
// sqlite3_complete() delimits them. Each statement starts at its first token
// (leading whitespace and comments dropped) and ends with its semicolon; empty
// statements are skipped. rest is what follows the last complete statement
// when it holds a statement without its final semicolon, or an unterminated
// string, identifier or comment; it is "" otherwise.
func splitSQL(text string) (stmts []string, rest string) {
	state := uint8(0)
	start := -1
	for i := 0; i < len(text); {
		c := text[i]
		j := i + 1
		var tok int
		switch {
		case c == ';':
			tok = tkSEMI
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			tok = tkWS
		case c == '/' && j < len(text) && text[j] == '*':
			k := strings.Index(text[i+2:], "*/")
			if k < 0 {
				return stmts, text[pick(start, i):]
			}
			j, tok = i+2+k+2, tkWS
		case c == '-' && j < len(text) && text[j] == '-':
			k := strings.IndexByte(text[i+2:], '\n')
			if k < 0 {
				j = len(text)
			} else {
				j = i + 2 + k + 1
			}
			tok = tkWS
		case c == '[' || c == '`' || c == '"' || c == '\'':
			end := c
			if c == '[' {
				end = ']'
			}
			k := strings.IndexByte(text[j:], end)
			if k < 0 {
				return stmts, text[pick(start, i):]
			}
			j, tok = j+k+1, tkOTHER
		case idChar(c):
			for j < len(text) && idChar(text[j]) {
				j++
			}
			tok = keyword(text[i:j])
		default:
			tok = tkOTHER
		}
		if start < 0 && tok != tkWS && tok != tkSEMI {
			start = i
		}
		state = completeTrans[state][tok]
		if tok == tkSEMI && state == 1 {
			if start >= 0 {
				stmts = append(stmts, text[start:j])
			}
			start = -1
		}
		i = j
	}
	if start >= 0 {
		rest = text[start:]
	}
	return stmts, rest
}

func pick(start, i int) int {
	if start >= 0 {
		return start
	}
	return i
}

func keyword(w string) int {
	switch {
	case strings.EqualFold(w, "create"):
		return tkCREATE
	case strings.EqualFold(w, "trigger"):
		return tkTRIGGER
	case strings.EqualFold(w, "temp"), strings.EqualFold(w, "temporary"):
		return tkTEMP
	case strings.EqualFold(w, "end"):
		return tkEND
	case strings.EqualFold(w, "explain"):
		return tkEXPLAIN
	}
	return tkOTHER
}

// onlyComment reports whether an incomplete rest holds no statement, only an
// unterminated block comment.
func onlyComment(rest string) bool { return strings.HasPrefix(rest, "/*") }
