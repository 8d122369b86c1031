package serve

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/dpsql/dpsql/ledger"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/jsonkeys"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/protect"
)

// Error codes: the stable "code" of an error response. Clients branch on the
// code; the message is the one the CLI prints and may change.
const (
	CodeBudgetExceeded = "budget_exceeded" // 403: the scope's budget cannot pay the statement; nothing released or charged
	CodeRefused        = "refused"         // 403: protected mode or the service refuses the statement; nothing read or charged
	CodeBadRequest     = "bad_request"     // 400 (413 when too large, 404 for an unknown endpoint): the request cannot be read; nothing run
	CodeUnauthorized   = "unauthorized"    // 401: no token, or not the token of an active account; nothing run
	CodeRateLimited    = "rate_limited"    // 429: the account's request rate is over its limit; nothing run
	CodeTimeout        = "timeout"         // 504: the statement was stopped at the timeout; a DP statement already accepted keeps its charge (the message names it), nothing is released
	CodeInternal       = "internal"        // 500: the service failed (e.g. the ledger's chain does not check); nothing released
)

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// QueryRequest is the body of POST /v1/query.
type QueryRequest struct {
	SQL string `json:"sql"`
}

// QueryResponse is the answer of POST /v1/query.
type QueryResponse struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	Truncated bool     `json:"truncated,omitempty"` // more rows than the service's MaxRows
	Charge    *Charge  `json:"charge"`              // null for a statement that spends nothing
}

// Charge is what a DP statement spent, from its committed ledger row.
type Charge struct {
	LedgerID    int64 `json:"ledger_id"`
	Mu          Float `json:"mu"`           // this statement's mu (GDP); +Inf (null) for Laplace noise, which has no finite mu
	MuSpent     Float `json:"mu_spent"`     // the scope's spend after it (+Inf once it holds a Laplace charge)
	MuRemaining Float `json:"mu_remaining"` // the largest mu a further statement may spend
	Epsilon     Float `json:"epsilon"`      // the scope's epsilon spent at its delta
	Delta       Float `json:"delta"`
}

// Float is a float64 whose JSON form is a number, or null for +Inf (a
// figure that has no finite value: the mu of Laplace noise) and NaN; null
// reads back as +Inf. encoding/json cannot write infinities.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.Inf(1))
		return nil
	}
	return json.Unmarshal(b, (*float64)(f))
}

// BudgetResponse is the answer of GET /v1/budget: the account's scope.
type BudgetResponse struct {
	Account       string   `json:"account"`
	Scope         string   `json:"scope"`
	MuBudget      Float    `json:"mu_budget"`
	MuSpent       Float    `json:"mu_spent"`
	MuRemaining   Float    `json:"mu_remaining"`
	EpsilonSpent  Float    `json:"epsilon_spent"`
	EpsilonBudget *float64 `json:"epsilon_budget,omitempty"`
	Delta         float64  `json:"delta"`
	Entries       int64    `json:"entries"`
}

// LedgerEntry is one ledger row of the account's scope.
type LedgerEntry struct {
	ID        int64  `json:"id"`
	At        string `json:"at"`
	Kind      string `json:"kind"` // charge or budget
	Mechanism string `json:"mechanism"`
	Mu        Float  `json:"mu"` // null (+Inf) for a charge with Laplace noise
	// Epsilon and Delta are a charge's (epsilon, delta) when it has them
	// (mechanism.CostOf): Laplace noise, which has no finite mu, or a
	// statement whose OPTIONS gave epsilon and delta; absent otherwise.
	Epsilon *float64 `json:"epsilon,omitempty"`
	Delta   *float64 `json:"delta,omitempty"`
	Query   string   `json:"query,omitempty"`
}

// Cost is the entry's cost as the CLI prints it.
func (e LedgerEntry) Cost() mechanism.Cost {
	c := mechanism.Cost{Mu: float64(e.Mu)}
	if e.Epsilon != nil {
		c.Epsilon = *e.Epsilon
	}
	if e.Delta != nil {
		c.Delta = *e.Delta
	}
	return c
}

// LedgerResponse is the answer of GET /v1/ledger.
type LedgerResponse struct {
	Scope   string        `json:"scope"`
	Entries []LedgerEntry `json:"entries"`
}

type accountKey struct{}

func accountOf(ctx context.Context) *Account { return ctx.Value(accountKey{}).(*Account) }

// authed authenticates the bearer token and applies the account's rate
// limit before h runs; a refused request runs nothing.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		token, ok := strings.CutPrefix(auth, "Bearer ")
		token = strings.TrimSpace(token)
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dpsql"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "no bearer token: send the header \"Authorization: Bearer TOKEN\" with the token the owner gave you (dpsql analyst add)")
			return
		}
		a, err := s.book.authenticate(r.Context(), token)
		if err != nil {
			writeError(w, http.StatusInternalServerError, CodeInternal, "cannot check the token against the ledger: "+err.Error())
			return
		}
		if a == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dpsql", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "the token is not that of an active account (revoked, mistyped, or for another database): ask the owner for a token")
			return
		}
		if !s.limiter(a).Allow() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf("account %s is over its limit of %g requests per second (bursts of %d): retry later", a.Name, s.cfg.Rate, s.cfg.Burst))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, a)))
	}
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	a := accountOf(r.Context())
	req, err := s.readQuery(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeBadRequest, fmt.Sprintf("the request body is over %d bytes: send one statement, shorter", s.cfg.MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	kind, err := checkStatement(req.SQL)
	if err != nil {
		s.writeStatementError(w, err, nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StatementTimeout)
	defer cancel()
	var resp *QueryResponse
	if kind == dpStatement {
		resp, err = s.runDP(ctx, a, req.SQL)
	} else {
		resp, err = s.runPlain(ctx, a, req.SQL)
	}
	if err != nil {
		s.writeStatementError(w, err, ctx)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// readQuery reads {"sql": "..."}: one JSON object, no other field, within
// the size limit.
func (s *Server) readQuery(w http.ResponseWriter, r *http.Request) (QueryRequest, error) {
	var req QueryRequest
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return req, fmt.Errorf("Content-Type is %q: send application/json", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		return req, err
	}
	// A key given twice, or in two cases ({"sql": ..., "SQL": ...}), is
	// refused: encoding/json would run one of them silently.
	if err := jsonkeys.Check(body); err != nil {
		return req, fmt.Errorf("the body is not the JSON object {\"sql\": \"...\"}: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("the body is not the JSON object {\"sql\": \"...\"}: %v", err)
	}
	if dec.More() {
		return req, errors.New("the body holds more than one JSON value: send one object {\"sql\": \"...\"}")
	}
	return req, nil
}

// runDP runs a SELECT WITH DIFFERENTIAL_PRIVACY through protected mode's
// engine, charged to the account's scope.
func (s *Server) runDP(ctx context.Context, a *Account, q string) (*QueryResponse, error) {
	res, err := s.engine.Query(ctx, a.Scope, q)
	if err != nil {
		return nil, err
	}
	rc := res.Receipt
	resp := &QueryResponse{Columns: res.Columns, Rows: res.Rows}
	if rc.ID != 0 { // EXPLAIN charges nothing
		resp.Charge = &Charge{LedgerID: rc.ID, Mu: Float(rc.Mu), MuSpent: Float(rc.MuSpent),
			MuRemaining: Float(rc.MuRemaining), Epsilon: Float(rc.Epsilon), Delta: Float(rc.Delta)}
	}
	if len(resp.Rows) > s.cfg.MaxRows {
		resp.Rows, resp.Truncated = resp.Rows[:s.cfg.MaxRows], true
	}
	for _, row := range resp.Rows {
		jsonRow(row)
	}
	return resp, nil
}

// runPlain runs any other accepted statement on an analyst connection of
// the account's scope (public tables only; it spends nothing).
func (s *Server) runPlain(ctx context.Context, a *Account, q string) (*QueryResponse, error) {
	db, err := s.analystDB(a.Scope)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	resp := &QueryResponse{Columns: cols, Rows: [][]any{}}
	for rows.Next() {
		if len(resp.Rows) == s.cfg.MaxRows {
			resp.Truncated = true
			break
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		resp.Rows = append(resp.Rows, jsonRow(vals))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return resp, nil
}

// jsonRow makes values JSON-safe in place: BLOBs as text (x'HEX' when not
// UTF-8), infinities as strings.
func jsonRow(vals []any) []any {
	for i, v := range vals {
		switch x := v.(type) {
		case []byte:
			if utf8.Valid(x) {
				vals[i] = string(x)
			} else {
				vals[i] = "x'" + hex.EncodeToString(x) + "'"
			}
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				vals[i] = fmt.Sprint(x)
			}
		}
	}
	return vals
}

// writeStatementError maps a statement's error to its code. ctx is the
// statement's context (nil when nothing ran).
func (s *Server) writeStatementError(w http.ResponseWriter, err error, ctx context.Context) {
	var bad *badRequest
	var se sqlite3.Error
	var stopped *protect.Stopped
	switch {
	case accountant.IsBudgetExceeded(err):
		writeError(w, http.StatusForbidden, CodeBudgetExceeded, err.Error())
	case protect.IsRefusal(err):
		writeError(w, http.StatusForbidden, CodeRefused, err.Error())
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.As(err, &stopped) && ctx != nil && ctx.Err() != nil:
		writeError(w, http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("the statement was stopped at the service's limit of %s, after it was accepted: it keeps its charge (ledger row %d, %s) and released nothing (GET /v1/ledger shows the charge)",
			s.cfg.StatementTimeout, stopped.Receipt.ID, stopped.Cost()))
	case errors.As(err, &stopped):
		// A read that failed after its charge: protected mode's reads cannot
		// fail on the data, so this is the service's failure.
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
	case ctx != nil && ctx.Err() != nil:
		writeError(w, http.StatusGatewayTimeout, CodeTimeout, fmt.Sprintf("the statement was stopped at the service's limit of %s, before it was accepted or charged: nothing was charged or released", s.cfg.StatementTimeout))
	case errors.As(err, &se) && se.Code == sqlite3.ErrError:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error()) // syntax errors, unknown tables and columns
	default:
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
	}
}

func (s *Server) budget(w http.ResponseWriter, r *http.Request) {
	a := accountOf(r.Context())
	st, err := s.ledger.Remaining(r.Context(), a.Scope)
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
		return
	}
	resp := BudgetResponse{Account: a.Name, Scope: a.Scope, MuBudget: Float(st.MuBudget), MuSpent: Float(st.MuSpent), MuRemaining: Float(st.MuRemaining),
		EpsilonSpent: Float(st.EpsilonSpent), Delta: st.Delta, Entries: st.Entries}
	if st.EpsilonBudget.Valid {
		resp.EpsilonBudget = &st.EpsilonBudget.Float64
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) ledgerEntries(w http.ResponseWriter, r *http.Request) {
	a := accountOf(r.Context())
	rows, err := s.db.QueryContext(r.Context(), `SELECT id, at, kind, mechanism, mu, params, coalesce(query, '') FROM dp_ledger
		WHERE scope = ? AND kind IN (?, ?) ORDER BY id`,
		a.Scope, ledger.EventCharge, ledger.EventBudget)
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
		return
	}
	defer rows.Close()
	resp := LedgerResponse{Scope: a.Scope, Entries: []LedgerEntry{}}
	for rows.Next() {
		var e LedgerEntry
		var params string
		if err := rows.Scan(&e.ID, &e.At, &e.Kind, &e.Mechanism, &e.Mu, &params, &e.Query); err != nil {
			writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
			return
		}
		if e.Kind == ledger.EventCharge {
			if c := mechanism.CostOf(float64(e.Mu), params); c.Epsilon > 0 {
				e.Epsilon, e.Delta = &c.Epsilon, &c.Delta
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	if err := rows.Err(); err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Never an empty 200: say what could not be written.
		status = http.StatusInternalServerError
		var e ErrorBody
		e.Error.Code, e.Error.Message = CodeInternal, "the answer could not be written as JSON: "+err.Error()
		b, _ = json.Marshal(e)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}
