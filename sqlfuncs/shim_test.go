package sqlfuncs_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/version"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/sqlfuncs"
)

// The C shim passes SQLite's values to a function's Go body as go-sqlite3's
// RegisterFunc did (int64, float64, string, []byte, a nil []byte for NULL;
// any number of arguments) and returns Go's values to SQLite as it did (nil,
// integers and booleans, floats, strings, byte slices, an empty one as
// NULL); errors and panics become the statement's error.
func TestShimValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shim.db")
	db, err := ext.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	results := map[string]any{
		"nil": nil, "int64": int64(-7), "int": 8, "true": true, "false": false, "float64": 1.5,
		"float32": float32(0.25), "empty": "", "text": "h\u00e9\x00llo", "noblob": []byte{},
		"blob": []byte{0, 1, 2}, "struct": struct{}{},
	}
	add := func(name string, f func(args ...any) (any, error)) {
		if n, err := sqlfuncs.RegisterTestFunc(path, name, f); err != nil || n != 1 {
			t.Fatalf("registering %s: %d connections, %v", name, n, err)
		}
	}
	add("t_types", func(args ...any) (any, error) {
		var s []string
		for _, a := range args {
			if b, ok := a.([]byte); ok && b == nil {
				s = append(s, "nil[]byte")
				continue
			}
			s = append(s, fmt.Sprintf("%T:%v", a, a))
		}
		return strings.Join(s, " "), nil
	})
	add("t_result", func(args ...any) (any, error) { return results[args[0].(string)], nil })
	add("t_error", func(args ...any) (any, error) { return nil, errors.New("t_error: refused") })
	add("t_panic", func(args ...any) (any, error) { panic("boom") })

	var got string
	if err := db.QueryRow(`SELECT t_types(1, 2.5, 'a', x'0102', NULL, x'', -3, 'b', 'c', 'd', 'e')`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "int64:1 float64:2.5 string:a []uint8:[1 2] nil[]byte []uint8:[] int64:-3 string:b string:c string:d string:e"; got != want {
		t.Errorf("arguments as Go sees them:\n got %s\nwant %s", got, want)
	}
	if err := db.QueryRow(`SELECT t_types()`).Scan(&got); err != nil || got != "" {
		t.Errorf("no arguments: %q, %v", got, err)
	}

	for _, c := range []struct{ name, typ, hex string }{
		{"nil", "null", ""}, {"int64", "integer", "2D37"}, {"int", "integer", "38"},
		{"true", "integer", "31"}, {"false", "integer", "30"}, {"float64", "real", "312E35"},
		{"float32", "real", "302E3235"}, {"empty", "text", ""}, {"text", "text", "68C3A9006C6C6F"},
		{"noblob", "null", ""}, {"blob", "blob", "000102"},
	} {
		var typ, hex string
		if err := db.QueryRow(`SELECT typeof(v), hex(v) FROM (SELECT t_result(?) AS v)`, c.name).Scan(&typ, &hex); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if typ != c.typ || hex != c.hex {
			t.Errorf("result %s: %s %s, want %s %s", c.name, typ, hex, c.typ, c.hex)
		}
	}
	for _, c := range []struct{ sql, want string }{
		{`SELECT t_result('struct')`, "t_result: internal error (please report): cannot return a struct {} to SQLite"},
		{`SELECT t_error()`, "t_error: refused"},
		{`SELECT t_panic()`, "t_panic: internal error (please report): boom"},
	} {
		var v any
		err := db.QueryRow(c.sql).Scan(&v)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v, want %q", c.sql, err, c.want)
		}
	}
	// The connection still works after a panic.
	if err := db.QueryRow(`SELECT dp_version()`).Scan(&got); err != nil || got != version.Version {
		t.Errorf("dp_version() after a panic: %q, %v", got, err)
	}
}

// dpsql's functions keep their flags: SQLITE_DETERMINISTIC (0x800) only on
// the pure ones, which SQLite may fold or reuse; never on a noisy one.
func TestShimDeterministicFlags(t *testing.T) {
	db, err := ext.Open(filepath.Join(t.TempDir(), "flags.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, narg, flags & 0x800 != 0 FROM pragma_function_list WHERE name LIKE 'dp\_%' ESCAPE '\' OR name LIKE 'gdp\_%' ESCAPE '\' ORDER BY name, narg`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	pure := map[string]bool{"dp_version": true, "gdp_epsilon": true, "gdp_delta": true, "gdp_mu": true, "dp_cost": true, "dp_cost_report": true, "dp_vec_select": true}
	seen := map[string]bool{}
	for rows.Next() {
		var name string
		var narg int
		var det bool
		if err := rows.Scan(&name, &narg, &det); err != nil {
			t.Fatal(err)
		}
		seen[name] = true
		if det != pure[name] {
			t.Errorf("%s/%d: deterministic = %v, want %v", name, narg, det, pure[name])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dp_gaussian", "dp_avgmix", "dp_vec_sum", "dp_select_topm", "dp_vec_select", "gdp_mu", "dp_epsilon"} {
		if !seen[name] {
			t.Errorf("%s is not registered", name)
		}
	}
}

// The attack of whoever wrote the file's schema: a view or a trigger that
// calls a charging function, so that the curator's plain SELECT from the view
// (or an INSERT into a table) spends the curator's budget, or switches the
// scope charged. SQLite refuses those functions there (SQLITE_DIRECTONLY),
// and nothing is charged; called directly they work.
func TestChargingFunctionsDirectOnly(t *testing.T) {
	db, err := ext.Open(filepath.Join(t.TempDir(), "direct.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`SELECT dp_init(1.0)`,
		`CREATE TABLE t(x REAL, v BLOB)`,
		`INSERT INTO t VALUES (1, x'0000803f')`,
		`CREATE TABLE log(y)`,
		`CREATE TRIGGER spend AFTER INSERT ON log BEGIN SELECT gdp_spend(0.5); END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, call := range []string{
		`dp_gaussian(x, 1, 0.5)`, `dp_laplace(x, 1, 0.5)`, `dp_tlaplace(x, 1, 0.5, 1e-6)`,
		`dp_optnoise(x, 1, 1, 0.01)`, `gdp_spend(0.5)`, `dp_use_scope('default')`,
		`dp_init(1, 1e-5, 'other')`, `dp_init_epsilon(1, 1e-5, 'other2')`,
		`dp_vec_sum(v, 1, 0.5)`, `dp_avgmix(v, 0, json_object('n', 1, 'mu', 0.5, 'into', 'r'))`,
		`dp_select_topm('t', json_object('into', 's'))`,
	} {
		name := call[:strings.IndexByte(call, '(')]
		if _, err := db.Exec(`DROP VIEW IF EXISTS v`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE VIEW v AS SELECT ` + call + ` AS r FROM t`); err != nil {
			t.Fatalf("creating the view of %s: %v", name, err)
		}
		var r any
		err := db.QueryRow(`SELECT r FROM v`).Scan(&r)
		if err == nil || !strings.Contains(err.Error(), "unsafe use of "+name) {
			t.Errorf("SELECT from a view calling %s: err = %v, want SQLite's unsafe use refusal", name, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO log VALUES (1)`); err == nil || !strings.Contains(err.Error(), "unsafe use of gdp_spend") {
		t.Errorf("a trigger calling gdp_spend: err = %v", err)
	}
	var spent float64
	if err := db.QueryRow(`SELECT mu_spent FROM dp_budget_status WHERE scope = 'default'`).Scan(&spent); err != nil || spent != 0 {
		t.Errorf("spent %v (%v) after the refusals, want 0", spent, err)
	}
	// Called directly, and pure functions inside a view, still work.
	if err := db.QueryRow(`SELECT gdp_spend(0.25)`).Scan(new(float64)); err != nil {
		t.Errorf("gdp_spend called directly: %v", err)
	}
	if _, err := db.Exec(`CREATE VIEW p AS SELECT gdp_epsilon(1, 1e-5) AS e, dp_vec_select(v, '[0]') AS s FROM t`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT e FROM p`).Scan(new(float64)); err != nil {
		t.Errorf("a pure function in a view: %v", err)
	}
}
