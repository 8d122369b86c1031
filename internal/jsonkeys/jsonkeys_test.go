package jsonkeys

import (
	"strings"
	"testing"
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
	} {
		err := Check([]byte(tc.in))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzCheck: Check never panics, and accepts what it accepted once again.
func FuzzCheck(f *testing.F) {
	f.Add(`{"sql": "a", "SQL": "b"}`)
	f.Add(`[{"a": [1, 2, {"b": null}]}]`)
	f.Fuzz(func(t *testing.T, s string) {
		if Check([]byte(s)) == nil && Check([]byte(s)) != nil {
			t.Fatal("not deterministic")
		}
	})
}
