package serve

import (
	"strings"
	"testing"
)

// FuzzCheckStatement: the statement check never panics, and a statement it
// accepts for an analyst connection starts with SELECT, WITH or VALUES,
// holds at most a final ";", and names nothing that starts with dp_ (as a
// word, a quoted name or a string), however it is quoted or commented.
func FuzzCheckStatement(f *testing.F) {
	for _, s := range []string{
		`SELECT * FROM wards`,
		`SELECT * FROM "dp_ledger"`,
		`SELECT * FROM [dp_budget]`,
		"SELECT * FROM `dp_account`",
		`SELECT * FROM 'dp_budget_status'`,
		`SELECT 1; DELETE FROM wards`,
		`SELECT 'a'';dp_x' AS s`,
		`/* c */ SELECT 1 -- x`,
		`WITH c AS (SELECT 1) INSERT INTO t SELECT * FROM c`,
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) FROM patients`,
		`SELECT "unterminated`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		kind, err := checkStatement(q)
		if err != nil || kind != plainStatement {
			return
		}
		toks, err := sqlTokens(q)
		if err != nil {
			t.Fatalf("accepted %q, which does not tokenize: %v", q, err)
		}
		first := strings.ToUpper(toks[0].text)
		if first != "SELECT" && first != "WITH" && first != "VALUES" {
			t.Fatalf("accepted %q, which starts with %q", q, first)
		}
		for i, tk := range toks {
			if tk.kind == tokSemicolon && i != len(toks)-1 {
				t.Fatalf("accepted %q, which holds two statements", q)
			}
			if tk.kind != tokPunct && strings.HasPrefix(strings.ToLower(tk.text), "dp_") {
				t.Fatalf("accepted %q, which names %q", q, tk.text)
			}
		}
	})
}

// Table-driven: what the tokenizer reads as one token.
func TestSQLTokens(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{`SELECT "a""b", 'c''d', [e f], ` + "`g``h`", []string{"SELECT", `a"b`, ",", "c'd", ",", "e f", ",", "g`h"}},
		{"SELECT 1 -- dp_ledger\n;", []string{"SELECT", "1", ";"}},
		{"SELECT /* dp_ledger */ x", []string{"SELECT", "x"}},
		{"SELECT x /* unterminated", []string{"SELECT", "x"}},
		{"SELECT dp_x(1)", []string{"SELECT", "dp_x", "(", "1", ")"}},
	} {
		toks, err := sqlTokens(tc.q)
		if err != nil {
			t.Fatalf("%q: %v", tc.q, err)
		}
		var got []string
		for _, tk := range toks {
			got = append(got, tk.text)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: tokens %q, want %q", tc.q, got, tc.want)
		}
	}
	if _, err := sqlTokens(`SELECT 'open`); err == nil {
		t.Error("an unterminated string tokenized")
	}
}
