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
// malformed numbers and blobs, stray characters), empty quoted identifiers,
// and parameters (a DP statement takes literals). BigQuery's named-argument
// arrow "=>", two tokens for SQLite, is read as one.
func lex(src string) ([]token, error) {
	toks := sqllex.Tokens(src)
	out := make([]token, 0, len(toks)+1)
	for k := 0; k < len(toks); k++ {
		t, i := toks[k], toks[k].Pos
		switch t.Kind {
		case sqllex.Comment: // only an unterminated /* comment is kept
			return nil, fmt.Errorf("unterminated /* comment at offset %d", i)
		case sqllex.Word:
			out = append(out, token{kind: tIdent, text: t.Text, pos: i})
		case sqllex.Quoted:
			v := t.Value()
			if t.Unterminated || v == "" {
				if t.Text[0] == '[' {
					return nil, fmt.Errorf("unterminated or empty [identifier] at offset %d", i)
				}
				return nil, fmt.Errorf("unterminated or empty quoted identifier at offset %d", i)
			}
			out = append(out, token{kind: tIdent, text: v, quoted: true, pos: i})
		case sqllex.String:
			if t.Unterminated {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			out = append(out, token{kind: tString, text: t.Value(), pos: i})
		case sqllex.Blob:
			if t.Unterminated {
				return nil, fmt.Errorf("unterminated blob literal at offset %d", i)
			}
			if t.Malformed {
				return nil, fmt.Errorf("malformed blob literal at offset %d", i)
			}
			out = append(out, token{kind: tBlob, text: t.Value(), pos: i})
		case sqllex.Number:
			if t.Malformed {
				return nil, fmt.Errorf("malformed number at offset %d", i)
			}
			out = append(out, token{kind: tNumber, text: t.Text, pos: i})
		case sqllex.Op:
			if t.Text == "=" && k+1 < len(toks) && toks[k+1].Text == ">" && toks[k+1].Pos == i+1 {
				out = append(out, token{kind: tOp, text: "=>", pos: i})
				k++
				continue
			}
			out = append(out, token{kind: tOp, text: t.Text, pos: i})
		default: // Param, Illegal
			return nil, fmt.Errorf("unexpected character %q at offset %d", src[i], i)
		}
	}
	return append(out, token{kind: tEOF, pos: len(src)}), nil
}
