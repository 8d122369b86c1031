// Package sqllex reads SQL text as SQLite reads it: [Next] and [Tokens] split
// it into the tokens of SQLite's tokenizer (tokenize.c, sqlite3GetToken), and
// [Split] cuts a script into statements where sqlite3_complete (complete.c)
// ends them, CREATE TRIGGER ... BEGIN ... END bodies included.
//
// It is dpsql's one SQL lexer: protected mode's parser (protect/dpselect),
// the analyst service's statement filter (serve) and the command line's
// statement splitter (cmd/dpsql) all read SQL through it, so that no filter
// sees a token boundary other than the one SQLite runs. It imports nothing
// but the standard library (no cgo).
//
// It departs from SQLite only where reading less as one token is safe:
//   - digit separators (1_000, SQLite 3.46 and later) are not read: a number
//     that runs into identifier characters is one Malformed Number, as in
//     SQLite before 3.46;
//   - a vertical tab is white space wherever it is (SQLite takes it as white
//     space only inside a run of white space, and refuses it elsewhere);
//   - a NUL byte is an Illegal token (SQLite's text ends there);
//   - "/*" at the very end is an Unterminated comment, as sqlite3_complete
//     reads it (the tokenizer reads "/" and "*").
package sqllex

import "strings"

// Kind is the class of a token.
type Kind uint8

const (
	// Illegal is a byte SQLite cannot start a token with (a NUL, a lone "!",
	// "^", "{", a parameter sigil with no name after it, ...).
	Illegal Kind = iota
	// Space is white space; a UTF-8 byte-order mark is white space too.
	Space
	// Comment is "--" up to (not including) the end of the line, or
	// "/* ... */".
	Comment
	// Word is a bare identifier or keyword, Text as written.
	Word
	// Quoted is an identifier written "name", `name` or [name].
	Quoted
	// String is a string literal, 'text'.
	String
	// Blob is a blob literal, x'hex' or X'hex'.
	Blob
	// Number is an integer or real literal: 12, 1.5, .5, 1e-3, 0x1F.
	Number
	// Param is a parameter: ?, ?NNN, :name, @name, #name or $name (with Tcl's
	// ::name and (suffix) forms).
	Param
	// Op is an operator or punctuation, ";" included: the multi-byte ones
	// are <> != == <= >= << >> || -> ->>.
	Op
)

var kindNames = [...]string{"Illegal", "Space", "Comment", "Word", "Quoted", "String", "Blob", "Number", "Param", "Op"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Token is one token of a source text.
type Token struct {
	Kind Kind
	Pos  int    // byte offset in the source
	Text string // the token as written, quotes and delimiters included
	// Unterminated: a string, quoted identifier, blob or /* comment that
	// runs to the end of the source without its closing delimiter.
	Unterminated bool
	// Malformed: a number that runs into identifier characters (12ab, 1e,
	// 0x), a blob whose digits are not an even number of hex digits, or a
	// Tcl-style parameter whose "(" is not closed. SQLite refuses all three.
	Malformed bool
}

// End is the offset just past the token.
func (t Token) End() int { return t.Pos + len(t.Text) }

// Is reports whether t is the keyword kw (a Word, compared without regard to
// ASCII case) or the operator kw.
func (t Token) Is(kw string) bool {
	switch t.Kind {
	case Word:
		return strings.EqualFold(t.Text, kw)
	case Op:
		return t.Text == kw
	}
	return false
}

// Value is what the token stands for: a String's text or a Quoted
// identifier's name without its quotes (doubled quotes read as one), a
// Blob's hex digits, and otherwise the text as written. An unterminated
// token's value runs to the end of the source.
func (t Token) Value() string {
	switch t.Kind {
	case String, Quoted:
		q := t.Text[0]
		if q == '[' {
			return strings.TrimSuffix(t.Text[1:], "]")
		}
		s := t.Text[1:]
		if !t.Unterminated {
			s = s[:len(s)-1]
		}
		if strings.IndexByte(s, q) < 0 {
			return s
		}
		return strings.ReplaceAll(s, string([]byte{q, q}), string(q))
	case Blob:
		return strings.TrimSuffix(t.Text[2:], "'")
	}
	return t.Text
}

// Next returns the token that starts at offset i of src (0 <= i < len(src)).
// Every byte belongs to exactly one token: the tokens from 0 on, each
// starting at the previous one's End, tile src.
func Next(src string, i int) Token {
	c := src[i]
	switch { // the usual cases first
	case c >= 'a' && c <= 'z' && c != 'x' || c >= 'A' && c <= 'Z' && c != 'X' || c == '_':
		j := i + 1
		for j < len(src) && IsIdentChar(src[j]) {
			j++
		}
		return Token{Kind: Word, Pos: i, Text: src[i:j]}
	case isSpace(c):
		j := i + 1
		for j < len(src) && isSpace(src[j]) {
			j++
		}
		return Token{Kind: Space, Pos: i, Text: src[i:j]}
	}
	at := func(k int) byte { return byteAt(src, k) }
	tok := func(kind Kind, end int) Token { return Token{Kind: kind, Pos: i, Text: src[i:end]} }
	switch {
	case c == 0xEF && at(i+1) == 0xBB && at(i+2) == 0xBF:
		return tok(Space, i+3)
	case c == '-' && at(i+1) == '-':
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return tok(Comment, len(src))
		}
		return tok(Comment, i+j)
	case c == '/' && at(i+1) == '*':
		j := strings.Index(src[i+2:], "*/")
		if j < 0 {
			t := tok(Comment, len(src))
			t.Unterminated = true
			return t
		}
		return tok(Comment, i+2+j+2)
	case c == '\'' || c == '"' || c == '`':
		kind := Quoted
		if c == '\'' {
			kind = String
		}
		for j := i + 1; j < len(src); j++ {
			if src[j] == c {
				if at(j+1) == c {
					j++
					continue
				}
				return tok(kind, j+1)
			}
		}
		t := tok(kind, len(src))
		t.Unterminated = true
		return t
	case c == '[':
		j := strings.IndexByte(src[i:], ']')
		if j < 0 {
			t := tok(Quoted, len(src))
			t.Unterminated = true
			return t
		}
		return tok(Quoted, i+j+1)
	case (c == 'x' || c == 'X') && at(i+1) == '\'':
		j := i + 2
		for isHex(at(j)) {
			j++
		}
		if at(j) == '\'' && (j-i)%2 == 0 {
			return tok(Blob, j+1)
		}
		for j < len(src) && src[j] != '\'' {
			j++
		}
		if j == len(src) {
			t := tok(Blob, j)
			t.Unterminated = true
			return t
		}
		t := tok(Blob, j+1)
		t.Malformed = true
		return t
	case isDigit(c) || c == '.' && isDigit(at(i+1)):
		j := i
		if c == '0' && (at(i+1) == 'x' || at(i+1) == 'X') && isHex(at(i+2)) {
			for j = i + 3; isHex(at(j)); j++ {
			}
		} else {
			for isDigit(at(j)) {
				j++
			}
			if at(j) == '.' {
				for j++; isDigit(at(j)); j++ {
				}
			}
			sign := at(j+1) == '+' || at(j+1) == '-'
			if e := at(j); (e == 'e' || e == 'E') && (isDigit(at(j+1)) || sign && isDigit(at(j+2))) {
				for j += 2; isDigit(at(j)); j++ {
				}
			}
		}
		bad := false
		for j < len(src) && IsIdentChar(src[j]) {
			bad = true
			j++
		}
		t := tok(Number, j)
		t.Malformed = bad
		return t
	case isIdentStart(c):
		j := i + 1
		for j < len(src) && IsIdentChar(src[j]) {
			j++
		}
		return tok(Word, j)
	case c == '?':
		j := i + 1
		for isDigit(at(j)) {
			j++
		}
		return tok(Param, j)
	case c == '$' || c == '@' || c == ':' || c == '#':
		// As SQLite: identifier characters, with Tcl's "::" inside and one
		// "(...)" suffix (ended by ")", white space or the end) after them.
		n, j, bad := 0, i+1, false
	scan:
		for j < len(src) {
			switch d := src[j]; {
			case IsIdentChar(d):
				n++
				j++
			case d == '(' && n > 0:
				for j++; j < len(src) && !isSpace(src[j]) && src[j] != ')'; j++ {
				}
				if at(j) == ')' {
					j++
				} else {
					bad = true
				}
				break scan
			case d == ':' && at(j+1) == ':':
				j += 2
			default:
				break scan
			}
		}
		if n == 0 {
			return tok(Illegal, j)
		}
		t := tok(Param, j)
		t.Malformed = bad
		return t
	}
	// Operators.
	n := 1
	switch c2 := at(i + 1); c {
	case '(', ')', ';', '+', '*', '%', ',', '&', '~', '.', '/':
	case '-':
		if c2 == '>' {
			n = 2
			if at(i+2) == '>' {
				n = 3
			}
		}
	case '=':
		if c2 == '=' {
			n = 2
		}
	case '<':
		if c2 == '=' || c2 == '>' || c2 == '<' {
			n = 2
		}
	case '>':
		if c2 == '=' || c2 == '>' {
			n = 2
		}
	case '|':
		if c2 == '|' {
			n = 2
		}
	case '!':
		if c2 != '=' {
			return tok(Illegal, i+1)
		}
		n = 2
	default:
		return tok(Illegal, i+1)
	}
	return tok(Op, i+n)
}

// byteAt is src[k], or 0 past its end.
func byteAt(src string, k int) byte {
	if k < len(src) {
		return src[k]
	}
	return 0
}

// Tokens returns the tokens of src in order, without white space and
// comments, except that an Unterminated /* comment is kept (SQLite reads it as
// running to the end of the text; a caller may refuse it).
func Tokens(src string) []Token {
	out := make([]Token, 0, min(len(src)/4+1, 1024)) // SQL has about one token per 4 bytes; long literals are few
	for i := 0; i < len(src); {
		t := Next(src, i)
		i = t.End()
		if t.Kind == Space || t.Kind == Comment && !t.Unterminated {
			continue
		}
		out = append(out, t)
	}
	return out
}

// IsIdentChar reports whether SQLite reads c as part of an identifier:
// ASCII letters and digits, "_", "$" and every byte of a multi-byte UTF-8
// character.
func IsIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
