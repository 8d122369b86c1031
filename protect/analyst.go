package protect

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/dpsql/dpsql/accountant"

	"github.com/dpsql/dpsql/protect/dpselect"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// AnalystConn is an analyst's connection (a database/sql driver.Conn). It
// runs SELECT WITH DIFFERENTIAL_PRIVACY statements through the Engine, on a
// connection the analyst never holds, and every other statement on its own
// SQLite connection under an authorizer that refuses whatever touches a
// protected table, writes outside TEMP, ATTACH, ANALYZE and the sqlite_stat
// tables, most PRAGMAs, load_extension and the functions that change the
// budget or the scope (see the refusal list in docs/protected-mode.md). Its scope is fixed
// when it is opened.
type AnalystConn struct {
	sc      *sqlite3.SQLiteConn
	scope   string
	engine  *Engine
	onClose func() error

	mu        sync.Mutex
	protected map[string]bool // lower-case names of protected tables
	denial    string          // why the authorizer last refused
	deniedTbl string          // the protected table it refused a read of, if that was why
	// syncing: the connection runs syncScope's own statements, which
	// the authorizer allows (analystscope.go).
	syncing bool
}

// Analyst-only refusals of functions: they change budgets, scopes or
// policies, or load code.
var analystDeniedFunctions = []string{"load_extension", "dp_init", "dp_init_epsilon", "dp_use_scope", "dp_protect", "dp_unprotect"}

// Release aggregates write their tables into the main schema (through the
// ledger connection), which an analyst may not.
var analystReleaseFunctions = []string{"dp_avgmix", "dp_select_topm"}

// Schema PRAGMAs an analyst may read; every other PRAGMA is refused.
var analystPragmas = []string{"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list", "function_list", "collation_list"}

// NewAnalystConn makes sc an analyst connection charging scope (which must
// be fixed by the owner). Call it from a go-sqlite3 ConnectHook's caller,
// after the connection is open; sc must not be handed to anyone else.
// onClose, when not nil, runs when the connection closes, before sc does
// (package ext drops its per-connection state there).
func NewAnalystConn(sc *sqlite3.SQLiteConn, scope string, onClose func() error) (*AnalystConn, error) {
	path := sc.GetFilename("main")
	e, err := EngineFor(path)
	if err != nil {
		return nil, err
	}
	if scope == "" {
		scope = accountant.DefaultScope
	}
	c := &AnalystConn{sc: sc, scope: scope, engine: e, onClose: onClose, protected: map[string]bool{}}
	sc.RegisterAuthorizer(c.authorize)
	return c, nil
}

// deny records the first reason a statement is refused (SQLite stops at the
// first denial, and later callbacks would only obscure it).
func (c *AnalystConn) deny(format string, args ...any) int {
	if c.denial == "" {
		c.denial = fmt.Sprintf(format, args...)
	}
	return sqlite3.SQLITE_DENY
}

func (c *AnalystConn) authorize(op int, a1, a2, a3 string) int {
	if c.syncing {
		return sqlite3.SQLITE_OK
	}
	switch op {
	case sqlite3.SQLITE_SELECT, sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT, 33 /* SQLITE_RECURSIVE */ :
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_READ:
		t := strings.ToLower(a1)
		switch {
		case c.protected[t]:
			if c.denial == "" {
				c.deniedTbl = a1
			}
			return c.deny("table %s is protected: analysts read it only through %s", a1, dpselect.Accepted)
		case strings.HasPrefix(t, "sqlite_stat"), t == "dbstat", t == "sqlite_dbpage":
			return c.deny("%s is not readable on an analyst connection (it holds samples or pages of table data)", a1)
		case t == "sqlite_sequence":
			return c.deny("sqlite_sequence is not readable on an analyst connection (it holds the largest rowid of AUTOINCREMENT tables, protected ones too)")
		case hiddenMain(a1, a3):
			return c.deny("%s.%s holds every scope's figures: an analyst connection sees its own scope only, in the TEMP tables dp_ledger, dp_budget, dp_scope_state and dp_budget_status (SELECT * FROM dp_ledger)", a3, a1)
		}
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_FUNCTION:
		if slices.Contains(analystDeniedFunctions, strings.ToLower(a2)) {
			return c.deny("%s() is not available on an analyst connection (budgets, scopes and policies are the owner's)", a2)
		}
		if slices.Contains(analystReleaseFunctions, strings.ToLower(a2)) {
			return c.deny("%s() writes a release table into the database, which an analyst connection may not: ask the owner to run it", a2)
		}
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_PRAGMA:
		if slices.Contains(analystPragmas, strings.ToLower(a1)) {
			return sqlite3.SQLITE_OK
		}
		return c.deny("PRAGMA %s is not available on an analyst connection (allowed: %s)", a1, strings.Join(analystPragmas, ", "))
	case sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE:
		t := strings.ToLower(a1)
		switch {
		case a3 == "temp" && (t == "sqlite_temp_master" || t == "sqlite_temp_schema"):
			return sqlite3.SQLITE_OK // TEMP DDL's bookkeeping; the DDL itself is checked on its own
		case t == "sqlite_master" || t == "sqlite_schema":
			return c.deny("this statement changes the database schema: an analyst connection reads public tables, runs SELECT WITH DIFFERENTIAL_PRIVACY on protected ones, and writes only its own TEMP tables")
		case a3 == "temp" && c.tempName(a1):
			return sqlite3.SQLITE_OK
		}
		return c.deny("an analyst connection writes only its own TEMP tables (refused: write to %s.%s)", a3, a1)
	case sqlite3.SQLITE_CREATE_TEMP_TABLE, sqlite3.SQLITE_CREATE_TEMP_VIEW, sqlite3.SQLITE_DROP_TEMP_TABLE, sqlite3.SQLITE_DROP_TEMP_VIEW:
		if c.tempName(a1) {
			return sqlite3.SQLITE_OK
		}
		return c.deny("a TEMP object may not be named %s (dpsql's dp_ names and protected tables' names are reserved)", a1)
	case sqlite3.SQLITE_CREATE_TEMP_INDEX, sqlite3.SQLITE_DROP_TEMP_INDEX:
		if c.tempName(a2) {
			return sqlite3.SQLITE_OK
		}
		return c.deny("an index on %s is not allowed on an analyst connection", a2)
	case sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH:
		return c.deny("ATTACH and DETACH are not available on an analyst connection")
	case sqlite3.SQLITE_ANALYZE:
		return c.deny("ANALYZE is not available on an analyst connection (sqlite_stat tables sample table data)")
	}
	return c.deny("this statement changes the database (action %d on %s): an analyst connection reads public tables, runs SELECT WITH DIFFERENTIAL_PRIVACY on protected ones, and writes only its own TEMP tables", op, a1)
}

func (c *AnalystConn) tempName(n string) bool {
	l := strings.ToLower(n)
	return !strings.HasPrefix(l, "dp_") && !strings.HasPrefix(l, "sqlite_") && !c.protected[l]
}

// refresh reloads the set of protected tables before a statement is prepared.
// It fails closed: if the policies cannot be read, nothing runs.
func (c *AnalystConn) refresh(ctx context.Context, query string) error {
	if hasVacuum(query) {
		return &Refusal{Msg: "VACUUM is not available on an analyst connection (VACUUM INTO copies the whole file)"}
	}
	ps, err := c.engine.policies.load(ctx, c.engine.meta)
	if err != nil {
		return fmt.Errorf("reading the protection policies: %w", err)
	}
	m := make(map[string]bool, len(ps))
	for t := range ps {
		m[strings.ToLower(t)] = true
	}
	c.mu.Lock()
	c.protected = m
	c.denial, c.deniedTbl = "", ""
	c.mu.Unlock()
	return c.syncScope(ctx)
}

// hasVacuum reports whether the word VACUUM occurs outside string literals
// and quoted identifiers (conservative: it refuses also a harmless mention).
func hasVacuum(q string) bool {
	u := strings.ToUpper(q)
	for i := 0; i < len(u); i++ {
		switch u[i] {
		case '\'', '"', '`':
			j := strings.IndexByte(u[i+1:], u[i])
			if j < 0 {
				return false
			}
			i += j + 1
		case 'V':
			if strings.HasPrefix(u[i:], "VACUUM") && (i == 0 || !isWordByte(u[i-1])) && (i+6 == len(u) || !isWordByte(u[i+6])) {
				return true
			}
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// explain turns SQLite's "not authorized" into the authorizer's reason.
func (c *AnalystConn) explain(err error) error {
	if err == nil {
		return nil
	}
	c.mu.Lock()
	d, tbl := c.denial, c.deniedTbl
	c.mu.Unlock()
	if d != "" && (strings.Contains(err.Error(), "not authorized") || strings.Contains(err.Error(), "prohibited")) {
		// A read of a protected table: how to write it as a DP statement,
		// from the table's columns and policy (examples.go).
		return &Refusal{Msg: d, Try: c.engine.example(context.Background(), c.engine.meta, tbl, "")}
	}
	if strings.Contains(err.Error(), accountant.OwnScopeOnly) { // dp_budget_remaining('other') and the like
		return &Refusal{Msg: err.Error()}
	}
	return err
}

func (c *AnalystConn) protectedKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.protected))
	for k := range c.protected {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, "\x00")
}

// Prepare implements driver.Conn.
func (c *AnalystConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext implements driver.ConnPrepareContext.
func (c *AnalystConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if dpselect.IsDP(query) {
		return &dpStmt{c: c, query: query}, nil
	}
	if err := c.refresh(ctx, query); err != nil {
		return nil, err
	}
	st, err := c.sc.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.explain(err)
	}
	return &analystStmt{Stmt: st, c: c, key: c.protectedKey()}, nil
}

// QueryContext implements driver.QueryerContext.
func (c *AnalystConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if dpselect.IsDP(query) {
		return c.queryDP(ctx, query, args)
	}
	if err := c.refresh(ctx, query); err != nil {
		return nil, err
	}
	r, err := c.sc.QueryContext(ctx, query, args)
	return r, c.explain(err)
}

// ExecContext implements driver.ExecerContext.
func (c *AnalystConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if dpselect.IsDP(query) {
		return nil, errDPExec
	}
	if err := c.refresh(ctx, query); err != nil {
		return nil, err
	}
	r, err := c.sc.ExecContext(ctx, query, args)
	return r, c.explain(err)
}

var errDPExec = &Refusal{Msg: "run SELECT WITH DIFFERENTIAL_PRIVACY as a query, so that its rows are returned (executing it would spend budget on rows nobody sees)"}

// Begin implements driver.Conn.
func (c *AnalystConn) Begin() (driver.Tx, error) {
	return c.sc.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx implements driver.ConnBeginTx.
func (c *AnalystConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.sc.BeginTx(ctx, opts)
}

// Close implements driver.Conn; it also runs onClose (NewAnalystConn).
func (c *AnalystConn) Close() error {
	eerr := c.engine.Release()
	var cerr error
	if c.onClose != nil {
		cerr = c.onClose()
	}
	ferr := errors.Join(cerr, eerr)
	if err := c.sc.Close(); err != nil {
		return err
	}
	return ferr
}

func (c *AnalystConn) queryDP(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) > 0 {
		return nil, &Refusal{Msg: dpselect.ParamRefusal}
	}
	if !c.sc.AutoCommit() {
		return nil, &Refusal{Msg: "run SELECT WITH DIFFERENTIAL_PRIVACY outside BEGIN ... COMMIT: its charge must commit before its rows are returned"}
	}
	res, err := c.engine.Query(ctx, c.scope, query)
	if err != nil {
		return nil, err
	}
	return &memRows{cols: res.Columns, rows: res.Rows}, nil
}

// analystStmt re-checks, at each execution, that no table became protected
// since the statement was prepared (SQLite authorizes at prepare time only).
type analystStmt struct {
	driver.Stmt
	c   *AnalystConn
	key string
}

var errPolicyChanged = &Refusal{Msg: "the owner changed which tables are protected since this statement was prepared: prepare it again"}

func (s *analystStmt) recheck(ctx context.Context) error {
	if err := s.c.refresh(ctx, ""); err != nil {
		return err
	}
	if s.c.protectedKey() != s.key {
		return errPolicyChanged
	}
	return nil
}

// ExecContext implements driver.StmtExecContext.
func (s *analystStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.recheck(ctx); err != nil {
		return nil, err
	}
	r, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	return r, s.c.explain(err)
}

// QueryContext implements driver.StmtQueryContext.
func (s *analystStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.recheck(ctx); err != nil {
		return nil, err
	}
	r, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	return r, s.c.explain(err)
}

// dpStmt is a prepared DP SELECT: it runs (and is charged) at each Query.
type dpStmt struct {
	c     *AnalystConn
	query string
}

func (s *dpStmt) Close() error  { return nil }
func (s *dpStmt) NumInput() int { return -1 } // arguments reach Query, which refuses them in words
func (s *dpStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errDPExec
}
func (s *dpStmt) Query(args []driver.Value) (driver.Rows, error) {
	if len(args) > 0 {
		return nil, &Refusal{Msg: dpselect.ParamRefusal}
	}
	return s.c.queryDP(context.Background(), s.query, nil)
}

// QueryContext implements driver.StmtQueryContext.
func (s *dpStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.queryDP(ctx, s.query, args)
}

// memRows serves released rows.
type memRows struct {
	cols []string
	rows [][]any
	i    int
}

func (r *memRows) Columns() []string { return r.cols }
func (r *memRows) Close() error      { return nil }
func (r *memRows) Next(dest []driver.Value) error {
	if r.i >= len(r.rows) {
		return io.EOF
	}
	for j, v := range r.rows[r.i] {
		dest[j] = v
	}
	r.i++
	return nil
}

// IsRefusal reports whether err refused a statement (nothing read, nothing charged).
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}
