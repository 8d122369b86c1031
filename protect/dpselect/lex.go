package dpselect

import (
	"fmt"
	"strings"
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

// lex splits src into tokens, dropping white space and comments.
func lex(src string) ([]token, error) {
	out := make([]token, 0, len(src)/4+2)
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("unterminated /* comment at offset %d", i)
			}
			i += j + 4
		case isIdentStart(c):
			if (c == 'x' || c == 'X') && i+1 < len(src) && src[i+1] == '\'' {
				j := strings.IndexByte(src[i+2:], '\'')
				if j < 0 {
					return nil, fmt.Errorf("unterminated blob literal at offset %d", i)
				}
				hex := src[i+2 : i+2+j]
				if len(hex)%2 != 0 || strings.Trim(hex, "0123456789abcdefABCDEF") != "" {
					return nil, fmt.Errorf("malformed blob literal at offset %d", i)
				}
				out = append(out, token{kind: tBlob, text: hex, pos: i})
				i += j + 3
				continue
			}
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			out = append(out, token{kind: tIdent, text: src[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			if c == '0' && i+1 < len(src) && (src[i+1] == 'x' || src[i+1] == 'X') {
				j += 2
				for j < len(src) && strings.IndexByte("0123456789abcdefABCDEF", src[j]) >= 0 {
					j++
				}
			} else {
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
				if j < len(src) && src[j] == '.' {
					j++
					for j < len(src) && src[j] >= '0' && src[j] <= '9' {
						j++
					}
				}
				if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
					k := j + 1
					if k < len(src) && (src[k] == '+' || src[k] == '-') {
						k++
					}
					if k < len(src) && src[k] >= '0' && src[k] <= '9' {
						for k < len(src) && src[k] >= '0' && src[k] <= '9' {
							k++
						}
						j = k
					}
				}
			}
			if j < len(src) && isIdentPart(src[j]) {
				return nil, fmt.Errorf("malformed number at offset %d", i)
			}
			out = append(out, token{kind: tNumber, text: src[i:j], pos: i})
			i = j
		case c == '\'':
			s, n, err := quoted(src[i:], '\'')
			if err != nil {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			out = append(out, token{kind: tString, text: s, pos: i})
			i += n
		case c == '"' || c == '`':
			s, n, err := quoted(src[i:], c)
			if err != nil || s == "" {
				return nil, fmt.Errorf("unterminated or empty quoted identifier at offset %d", i)
			}
			out = append(out, token{kind: tIdent, text: s, quoted: true, pos: i})
			i += n
		case c == '[':
			j := strings.IndexByte(src[i:], ']')
			if j < 2 {
				return nil, fmt.Errorf("unterminated or empty [identifier] at offset %d", i)
			}
			out = append(out, token{kind: tIdent, text: src[i+1 : i+j], quoted: true, pos: i})
			i += j + 1
		default:
			op := ""
			for _, o := range []string{"<>", "!=", "==", "<=", ">=", "=>", "||", "<<", ">>"} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if strings.IndexByte("(),;=<>+-*/%.~&|", c) < 0 {
					return nil, fmt.Errorf("unexpected character %q at offset %d", c, i)
				}
				op = src[i : i+1]
			}
			out = append(out, token{kind: tOp, text: op, pos: i})
			i += len(op)
		}
	}
	return append(out, token{kind: tEOF, pos: len(src)}), nil
}

// quoted reads a literal delimited by q, with qq standing for q; it returns
// the unquoted text and the bytes consumed.
func quoted(s string, q byte) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] == q {
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i++
				continue
			}
			return b.String(), i + 1, nil
		}
		b.WriteByte(s[i])
	}
	return "", 0, fmt.Errorf("unterminated")
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }
