package protect_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/protect/dpselect"
)

// A DP statement with a bind parameter is refused by protected mode, in
// words, whether or not arguments are given and whether it is prepared or
// queried directly; SQLite never sees it (its error would be `near
// "OPTIONS": syntax error`), and nothing is charged.
func TestBindParameterRefused(t *testing.T) {
	path, owner := newClinic(t, 10, `json_object('privacy_unit', 'pid')`,
		insertPatients(50, func(i int) (int, string, int, any) { return i, "F", 20 + i%50, 22.5 }))
	a := openAnalyst(t, path)
	ctx := context.Background()
	const dp = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 1) COUNT(*) AS n FROM patients WHERE age >= "
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), "refused: ") || !strings.Contains(err.Error(), "bind parameters are not accepted in a protected statement") ||
			!strings.Contains(err.Error(), "write the value inline") || strings.Contains(err.Error(), "near \"OPTIONS\"") {
			t.Errorf("%s: %v", what, err)
		}
	}
	for _, p := range []string{"?", "?1", ":age", "@age", "$age"} {
		_, _, err := queryAll(ctx, a, dp+p)
		check(p+" without arguments", err)
		if err != nil && !strings.HasPrefix(err.Error(), "refused: WHERE: ") {
			t.Errorf("%s: the refusal does not name WHERE: %v", p, err)
		}
		_, err = a.QueryContext(ctx, dp+p, 18)
		check(p+" with an argument", err)
		st, err := a.PrepareContext(ctx, dp+p)
		if err != nil {
			t.Fatalf("prepare %s: %v", p, err)
		}
		_, err = st.QueryContext(ctx, 18)
		check(p+" prepared, with an argument", err)
		_, err = st.QueryContext(ctx)
		check(p+" prepared, without arguments", err)
		st.Close()
	}
	// Arguments given to a statement without a parameter: the same words.
	_, err := a.QueryContext(ctx, dp+"18", 18)
	check("arguments without a parameter", err)
	if err != nil && !strings.Contains(err.Error(), dpselect.ParamRefusal) {
		t.Errorf("arguments without a parameter: %v", err)
	}
	if n := ledgerRows(t, owner); n != 0 {
		t.Errorf("%d charges after refusals, want 0", n)
	}
	// Plain statements keep SQLite's parameters.
	var beds int
	if err := a.QueryRowContext(ctx, "SELECT beds FROM wards WHERE name = ?", "north").Scan(&beds); err != nil || beds != 12 {
		t.Errorf("a public table with a parameter: %d, %v", beds, err)
	}
}
