package jsonkeys

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"sql": "a"}`, ""},
		{`{"a": {"b": 1, "c": [1, {"d": 2}]}, "e": null}`, ""},
		{`[1, "x", {"a": 1}, {"a": 2}]`, ""},
		{`{"sql": "a", "sql": "b"}`, `"sql" appears twice`},
		{`{"sql": "a", "SQL": "b"}`, `differ only in case`},
		{`{"mu": 1, "x": {"n": 1, "N": 2}}`, `differ only in case`},
		{`[{"a": 1, "a": 1}]`, `appears twice`},
		{`{"a": 1} {"b": 2}`, `more than one`},
		{`{"a": `, `EOF`},
		{`{"\u0061": 1, "a": 2}`, `appears twice`},
		{`{"sql": "a", "ſql": "b"}`, `differ only in case`},  // encoding/json matches ſ (U+017F) to s
		{"{\"k\": 1, \"\u212a\": 2}", `differ only in case`}, // and the Kelvin sign to k
		{`{"straße": 1, "STRASSE": 2}`, ""},                  // not equal under simple folding
	} {
		err := Check([]byte(tc.in))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzCheck: Check never panics, and fold agrees with strings.EqualFold.
func FuzzCheck(f *testing.F) {
	f.Add(`{"sql": "a", "SQL": "b"}`, "sql", "ſQL")
	f.Add(`[{"a": [1, 2, {"b": null}]}]`, "k", "\u212a")
	f.Fuzz(func(t *testing.T, s, a, b string) {
		_ = Check([]byte(s))
		if (fold(a) == fold(b)) != strings.EqualFold(a, b) && utf8.ValidString(a) && utf8.ValidString(b) {
			t.Fatalf("fold(%q) = %q, fold(%q) = %q, EqualFold %v", a, fold(a), b, fold(b), strings.EqualFold(a, b))
		}
	})
}
