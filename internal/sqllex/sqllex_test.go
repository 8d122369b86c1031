package sqllex

import (
	"fmt"
	"strings"
	"testing"
)

// show renders the tokens of src, white space and comments included, as
// Kind:Text with ! for Malformed and … for Unterminated.
func show(src string) string {
	var b []string
	for i := 0; i < len(src); {
		t := Next(src, i)
		s := fmt.Sprintf("%v:%s", t.Kind, t.Text)
		if t.Malformed {
			s += "!"
		}
		if t.Unterminated {
			s += "…"
		}
		if t.Kind != Space {
			b = append(b, s)
		}
		i = t.End()
	}
	return strings.Join(b, " ")
}

// Every class of SQLite's tokenizer, with the boundaries SQLite draws.
func TestNext(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		// identifiers and keywords
		{`SELECT a_1, $x, é`, `Word:SELECT Word:a_1 Op:, Param:$x Op:, Word:é`},
		{`a$b _x`, `Word:a$b Word:_x`},
		{`"a""b" [c d] ` + "`e``f`", `Quoted:"a""b" Quoted:[c d] Quoted:` + "`e``f`"},
		{`"" [] [a""b]`, `Quoted:"" Quoted:[] Quoted:[a""b]`},
		{`"open`, `Quoted:"open…`},
		{`[open`, `Quoted:[open…`},
		// strings and blobs
		{`'it''s' ''`, `String:'it''s' String:''`},
		{`'open''`, `String:'open''…`},
		{`x'00ff' X'' x'0' x'zz' x'00`, `Blob:x'00ff' Blob:X'' Blob:x'0'! Blob:x'zz'! Blob:x'00…`},
		{`xy'a'`, `Word:xy String:'a'`},
		// numbers
		{`12 1.5 .5 1. 1e10 1E+5 2e-3 0x1F 0XaB`,
			`Number:12 Number:1.5 Number:.5 Number:1. Number:1e10 Number:1E+5 Number:2e-3 Number:0x1F Number:0XaB`},
		{`12ab 1e 1e+ 0x 0xg 1_000 1$`,
			`Number:12ab! Number:1e! Number:1e! Op:+ Number:0x! Number:0xg! Number:1_000! Number:1$!`},
		{`0x1.5 1.2.3 1..2`, `Number:0x1 Number:.5 Number:1.2 Number:.3 Number:1. Number:.2`},
		{`a.b .x`, `Word:a Op:. Word:b Op:. Word:x`},
		// parameters
		{`? ?12 :a @b #c $d`, `Param:? Param:?12 Param::a Param:@b Param:#c Param:$d`},
		{`$a::b(c d) $a(b) $a(b :`, `Param:$a::b(c! Word:d Op:) Param:$a(b) Param:$a(b! Illegal::`},
		{`$ @ # :1`, `Illegal:$ Illegal:@ Illegal:# Param::1`},
		// operators
		{`<> != == <= >= << >> || -> ->> = < > | - + * / % , ; ( ) & ~ .`,
			`Op:<> Op:!= Op:== Op:<= Op:>= Op:<< Op:>> Op:|| Op:-> Op:->> Op:= Op:< Op:> Op:| Op:- ` +
				`Op:+ Op:* Op:/ Op:% Op:, Op:; Op:( Op:) Op:& Op:~ Op:.`},
		{`a=>b <=> ==>`, `Word:a Op:= Op:> Word:b Op:<= Op:> Op:== Op:>`},
		{`! ^ { } \ ] ` + "\x00", `Illegal:! Illegal:^ Illegal:{ Illegal:} Illegal:\ Illegal:] Illegal:` + "\x00"},
		// comments and white space
		{"a -- b;\nc", "Word:a Comment:-- b; Word:c"},
		{"a --", "Word:a Comment:--"},
		{"a /* b; */c /* d", "Word:a Comment:/* b; */ Word:c Comment:/* d…"},
		{"a /*", "Word:a Comment:/*…"},
		{"a /*/ b", "Word:a Comment:/*/ b…"},
		{"a/b-c", "Word:a Op:/ Word:b Op:- Word:c"},
		{"\ufeffSELECT\v1\f", "Word:SELECT Number:1"},
		{"SELECT\ufeff1", "Word:SELECT\ufeff1"},
	} {
		if got := show(tc.src); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.src, got, tc.want)
		}
	}
}

func TestValue(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`"a""b"`, `a"b`}, {"`a``b`", "a`b"}, {`[a""b]`, `a""b`}, {`'it''s'`, `it's`}, {`''`, ``},
		{`x'0aF1'`, `0aF1`}, {`x'zz'`, `zz`}, {`'open''s`, `open's`}, {`[open`, `open`}, {`x'00`, `00`},
		{`abc`, `abc`}, {`1.5`, `1.5`}, {`:x`, `:x`},
	} {
		if got := Next(tc.src, 0).Value(); got != tc.want {
			t.Errorf("Value of %s = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestTokens(t *testing.T) {
	toks := Tokens("/* a */ SELECT -- b\n x /* open")
	var got []string
	for _, tk := range toks {
		got = append(got, tk.Text)
	}
	if strings.Join(got, "|") != "SELECT|x|/* open" || !toks[2].Unterminated || toks[1].Pos != 21 {
		t.Errorf("Tokens = %q %+v", got, toks)
	}
	if !toks[0].Is("select") || toks[0].Is("SELEC") || Next("SELECT", 0).Is("(") || !Next("(", 0).Is("(") ||
		Next("'x'", 0).Is("x") {
		t.Error("Is")
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in    string
		stmts []string
		rest  string
	}{
		{"", nil, ""},
		{" -- only a comment", nil, ""},
		{"SELECT 1; SELECT 2", []string{"SELECT 1;"}, "SELECT 2"},
		{";; SELECT 'a;b' /* ; */, \"c;\", [d;], x'00' -- ;\n;",
			[]string{"SELECT 'a;b' /* ; */, \"c;\", [d;], x'00' -- ;\n;"}, ""},
		{"SELECT 1; SELECT 'open; x", []string{"SELECT 1;"}, "SELECT 'open; x"},
		{"SELECT 1; /* open; x", []string{"SELECT 1;"}, "/* open; x"},
		{"SELECT 1 /* open; x", nil, "SELECT 1 /* open; x"},
		{"SELECT x'00", nil, "SELECT x'00"},
		// A trigger body ends at ";END;", not at its first ";".
		{"CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 'end;'; END; SELECT 2;",
			[]string{"CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 'end;'; END;", "SELECT 2;"}, ""},
		{"create temporary trigger t begin select 1; end", nil, "create temporary trigger t begin select 1; end"},
		{"EXPLAIN CREATE TRIGGER t BEGIN SELECT 1; END; x;",
			[]string{"EXPLAIN CREATE TRIGGER t BEGIN SELECT 1; END;", "x;"}, ""},
		// Not a trigger: CREATE not first, or TRIGGER not after CREATE [TEMP].
		{"SELECT create, trigger; SELECT end;", []string{"SELECT create, trigger;", "SELECT end;"}, ""},
		{"CREATE TABLE trigger(x); SELECT 1;", []string{"CREATE TABLE trigger(x);", "SELECT 1;"}, ""},
		{"\ufeffSELECT 1;", []string{"SELECT 1;"}, ""},
	} {
		stmts, rest := Split(tc.in)
		if strings.Join(stmts, "\x00") != strings.Join(tc.stmts, "\x00") || len(stmts) != len(tc.stmts) || rest != tc.rest {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", tc.in, stmts, rest, tc.stmts, tc.rest)
		}
	}
}

// FuzzTokens: the tokens tile the source; only the last token can be
// Unterminated; a Word, Number or Param never ends where an identifier
// character follows; a String or Quoted token's value, quoted again, reads
// back as one token with the same value; Split's statements are substrings in
// order that split to themselves.
func FuzzTokens(f *testing.F) {
	for _, s := range []string{
		"SELECT 'a''b', \"c\", [d], x'00', 1.5e3, 0x1F, ?1, :a -- x\n /* y */ a -> b <> c;",
		"CREATE TRIGGER t BEGIN x; END; y;", "$a::b(c) @x #y 12ab x'0' '", "\ufeff\v/*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		end := 0
		for end < len(src) {
			tk := Next(src, end)
			if tk.Pos != end || len(tk.Text) == 0 || tk.Text != src[tk.Pos:tk.End()] {
				t.Fatalf("%q: token %+v at %d", src, tk, end)
			}
			if tk.Unterminated && tk.End() != len(src) {
				t.Fatalf("%q: unterminated %+v before the end", src, tk)
			}
			if (tk.Kind == Word || tk.Kind == Number) && tk.End() < len(src) && IsIdentChar(src[tk.End()]) {
				t.Fatalf("%q: %+v is followed by an identifier character", src, tk)
			}
			if !tk.Unterminated && (tk.Kind == String || tk.Kind == Quoted && tk.Text[0] != '[') {
				q := string(tk.Text[0])
				again := q + strings.ReplaceAll(tk.Value(), q, q+q) + q
				if back := Next(again, 0); back.Text != again || back.Value() != tk.Value() {
					t.Fatalf("%q: %+v re-quoted as %q reads %+v", src, tk, again, back)
				}
			}
			end = tk.End()
		}
		stmts, rest := Split(src)
		pos := 0
		for _, s := range stmts {
			k := strings.Index(src[pos:], s)
			if k < 0 || !strings.HasSuffix(s, ";") {
				t.Fatalf("statement %q not in order in %q, or without its semicolon", s, src)
			}
			pos += k + len(s)
			if again, r := Split(s); len(again) != 1 || again[0] != s || r != "" {
				t.Fatalf("statement %q splits to %q, %q", s, again, r)
			}
		}
		if !strings.HasSuffix(src, rest) {
			t.Fatalf("rest %q is not a suffix of %q", rest, src)
		}
	})
}
