package sqllex

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

// Split splits text into complete statements the way SQLite's
// sqlite3_complete() delimits them. Each statement starts at its first token
// (leading white space and comments dropped) and ends with its semicolon;
// empty statements are skipped. rest is what follows the last complete
// statement when it holds a statement without its final semicolon, or an
// unterminated string, identifier, blob or /* comment (then rest starts at
// the statement, or at the comment when no statement has started); it is ""
// otherwise. A "--" comment at the very end is complete.
func Split(text string) (stmts []string, rest string) {
	state := uint8(0)
	start := -1
	for i := 0; i < len(text); {
		t := Next(text, i)
		if t.Unterminated {
			if start < 0 {
				start = i
			}
			return stmts, text[start:]
		}
		var tk int
		switch t.Kind {
		case Space, Comment:
			tk = tkWS
		case Word:
			tk = completeKeyword(t.Text)
		case Op:
			tk = tkOTHER
			if t.Text == ";" {
				tk = tkSEMI
			}
		default:
			tk = tkOTHER
		}
		if start < 0 && tk != tkWS && tk != tkSEMI {
			start = i
		}
		state = completeTrans[state][tk]
		if tk == tkSEMI && state == 1 {
			if start >= 0 {
				stmts = append(stmts, text[start:t.End()])
			}
			start = -1
		}
		i = t.End()
	}
	if start >= 0 {
		rest = text[start:]
	}
	return stmts, rest
}

func completeKeyword(w string) int {
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
