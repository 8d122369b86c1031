package sqlfuncs

import (
	"errors"
	"strings"
	"testing"
)

// Each signature spells its forms as the reference does, and a call of any
// other number of arguments is refused with that spelling.
func TestSignatureUsage(t *testing.T) {
	for _, tt := range []struct {
		sig  signature
		want string
	}{
		{sigVersion, "no arguments"},
		{sigGDPEpsilon, "(mu, delta)"},
		{sigInit, "(mu [, delta [, scope [, neighbours]]])"},
		{sigInitEpsilon, "(epsilon, delta [, scope [, neighbours]])"},
		{sigBudgetRemaining, "([scope])"},
		{sigSpend, "(mu [, note])"},
		{sigGaussian, "(x, sensitivity, mu) or (x, sensitivity, epsilon, delta)"},
		{sigOptNoise, "(x, sensitivity, epsilon, delta [, loss])"},
		{sigEpsilon, "(delta) or (scope, delta)"},
		{sigVecSelect, "(x, indices_json)"},
	} {
		if got := tt.sig.usage(); got != tt.want {
			t.Errorf("%s: usage %q, want %q", tt.sig.name, got, tt.want)
		}
		for _, n := range []int{0, 1, 2, 3, 4, 5, 6} {
			known := false
			for _, f := range tt.sig.forms {
				known = known || len(f) == n
			}
			if known {
				continue
			}
			_, err := tt.sig.parse(make([]any, n))
			if err == nil || !strings.Contains(err.Error(), "takes "+tt.want+", got") {
				t.Errorf("%s with %d arguments: %v", tt.sig.name, n, err)
			}
		}
	}
}

// parse checks each argument in order against the form the number of
// arguments chose, says what is wrong in the argument's own name, and gives
// the checked values to the body, absent ones their defaults.
func TestSignatureParse(t *testing.T) {
	tests := []struct {
		sig  signature
		in   []any
		want string
	}{
		{sigInit, []any{int64(2)}, ""},
		{sigInit, []any{2.5, 1e-6, "rows", "replace_one"}, ""},
		{sigInit, []any{"2"}, "mu must be a number, got TEXT"},
		{sigInit, []any{[]byte(nil)}, "mu must be a number, got NULL"},
		{sigInit, []any{[]byte{1}}, "mu must be a number, got a BLOB"},
		{sigInit, []any{1.0, 1.0}, "delta must lie strictly between 0 and 1, got 1"},
		{sigInit, []any{1.0, 0.1, ""}, "scope must not be empty"},
		{sigInit, []any{1.0, 0.1, "s", "swap"}, `neighbours must be 'add_remove' (one person's row added or removed) or 'replace_one'`},
		{sigGDPDelta, []any{1.0, -1.0}, "epsilon must be >= 0, got -1"},
		{sigGaussian, []any{"[1, 2]", 1.0, 0.5}, ""},
		{sigGaussian, []any{"[1e400]", 1.0, 0.5}, "x: vector element 0 (1e400) is out of range"},
		{sigGaussian, []any{"ten", 1.0, 0.5}, `x must be a number or a vector (float32 BLOB or JSON array TEXT such as '[1, 2.5]'), got TEXT "ten"`},
	}
	for _, tt := range tests {
		a, err := tt.sig.parse(tt.in)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s%v: %v", tt.sig.name, tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s%v: err = %v, want %q", tt.sig.name, tt.in, err, tt.want)
		}
		if a != nil {
			t.Errorf("%s%v: arguments returned with an error", tt.sig.name, tt.in)
		}
	}
	a, err := sigInit.parse([]any{int64(2)})
	if err != nil {
		t.Fatal(err)
	}
	if a.num("mu", 0) != 2 || a.num("delta", 1e-5) != 1e-5 || a.str("scope", "default") != "default" || a.has("neighbours") {
		t.Errorf("dp_init(2): mu %v, delta %v, scope %q", a.num("mu", 0), a.num("delta", 1e-5), a.str("scope", "default"))
	}
	a, err = sigGaussian.parse([]any{"[1, 2]", int64(1), 1.0, 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := a.raw("x").([]float32); !ok || len(v) != 2 || !a.has("epsilon") || a.has("mu") || a.num("sensitivity", 0) != 1 {
		t.Errorf("dp_gaussian(vector, 1, 1, 1e-5): x %v, epsilon %v, mu %v", a.raw("x"), a.has("epsilon"), a.has("mu"))
	}
}

// named names a function once: a message that already names it stays, a
// release package's own prefix gives way to the function's, and the original
// error is still reachable.
func TestNamed(t *testing.T) {
	base := errors.New("avgmix: m = 500 exceeds n = 100")
	for _, tt := range []struct {
		err  error
		want string
	}{
		{base, "dp_avgmix: m = 500 exceeds n = 100"},
		{errors.New("dp_avgmix: writing row 7 of r: disk full"), "dp_avgmix: writing row 7 of r: disk full"},
		{errors.New("no such table: t"), "dp_avgmix: no such table: t"},
	} {
		got := named("dp_avgmix", tt.err)
		if got.Error() != tt.want || !errors.Is(got, tt.err) {
			t.Errorf("named(%q) = %q, want %q (wrapping it)", tt.err, got, tt.want)
		}
	}
	if named("f", nil) != nil {
		t.Error("named(nil) is not nil")
	}
}
