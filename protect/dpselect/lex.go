package dpselect

import (
	"fmt"

	"github.com/dpsql/dpsql/internal/sqllex"
)

// tokKind classifies a token.
type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // bare or quoted identifier (text unquoted); keywords are bare identifiers
	tNumber         // numeric literal, text as written
	tString         // string literal, text unquoted
	tBlob           // x'..' literal, text is the hex digits
	tOp             // operator or punctuation, text as written
	tParam          // bind parameter (?, ?1, :name, @name, $name), text as written: refused by Parse
)

type token struct {
	kind   tokKind
	text   string
	quoted bool // an identifier written in quotes: never a keyword
	pos    int
}

// lex reads src with SQLite's tokenizer (package sqllex) and keeps what the
// grammar reads, dropping white space and comments. It refuses what SQLite
// would refuse (unterminated strings, identifiers, blobs and comments,
// malformed numbers and blobs, stray characters) and empty quoted
// identifiers. It keeps bind parameters as tParam tokens, so that a DP
// statement holding one is routed here (IsDP) and refused in words (Parse:
// a DP statement takes literals) rather than handed to SQLite, which cannot
// read its OPTIONS. BigQuery's named-argument arrow "=>", two tokens for
// SQLite, is read as one.
func lex(src string) ([]token, error) {
	out := make([]token, 0, min(len(src)/4+2, 1024)) // SQL has about one token per 4 bytes
	for i := 0; i < len(src); {
		t := sqllex.Next(src, i)
		i = t.End()
		switch t.Kind {
		case sqllex.Space:
		case sqllex.Comment:
			if t.Unterminated {
				return nil, fmt.Errorf("unterminated /* comment at offset %d", t.Pos)
			}
		case sqllex.Word:
			out = append(out, token{kind: tIdent, text: t.Text, pos: t.Pos})
		case sqllex.Quoted:
			v := t.Value()
			if t.Unterminated || v == "" {
				if t.Text[0] == '[' {
					return nil, fmt.Errorf("unterminated or empty [identifier] at offset %d", t.Pos)
				}
				return nil, fmt.Errorf("unterminated or empty quoted identifier at offset %d", t.Pos)
			}
			out = append(out, token{kind: tIdent, text: v, quoted: true, pos: t.Pos})
		case sqllex.String:
			if t.Unterminated {
				return nil, fmt.Errorf("unterminated string at offset %d", t.Pos)
			}
			out = append(out, token{kind: tString, text: t.Value(), pos: t.Pos})
		case sqllex.Blob:
			if t.Unterminated {
				return nil, fmt.Errorf("unterminated blob literal at offset %d", t.Pos)
			}
			if t.Malformed {
				return nil, fmt.Errorf("malformed blob literal at offset %d", t.Pos)
			}
			out = append(out, token{kind: tBlob, text: t.Value(), pos: t.Pos})
		case sqllex.Number:
			if t.Malformed {
				return nil, fmt.Errorf("malformed number at offset %d", t.Pos)
			}
			out = append(out, token{kind: tNumber, text: t.Text, pos: t.Pos})
		case sqllex.Op:
			if t.Text == "=" && i < len(src) && src[i] == '>' && sqllex.Next(src, i).Text == ">" {
				out = append(out, token{kind: tOp, text: "=>", pos: t.Pos})
				i++
				continue
			}
			out = append(out, token{kind: tOp, text: t.Text, pos: t.Pos})
		case sqllex.Param:
			out = append(out, token{kind: tParam, text: t.Text, pos: t.Pos})
		default: // Illegal
			return nil, fmt.Errorf("unexpected character %q at offset %d", src[t.Pos], t.Pos)
		}
	}
	return append(out, token{kind: tEOF, pos: len(src)}), nil
}

// ParamRefusal says why a DP statement's bind parameters are refused and
// what to write instead: the one message of the parser (which adds the
// parameter and its offset) and of the analyst connections given arguments.
// (The statement's text is what is checked, priced and recorded.)
const ParamRefusal = paramWhat + ": " + paramFix

const (
	paramWhat = "bind parameters are not accepted in a protected statement"
	paramFix  = "write the value inline as a literal, e.g. age >= 18 rather than age >= ?"
)

// paramError refuses the first bind parameter of toks, if any.
func paramError(toks []token) error {
	for _, t := range toks {
		if t.kind == tParam {
			return &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("%s (found %s at offset %d): %s", paramWhat, t.text, t.pos, paramFix), Bare: true}
		}
	}
	return nil
}
