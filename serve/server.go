package serve

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dpsql/dpsql/ledger"

	"golang.org/x/time/rate"

	"github.com/dpsql/dpsql/ext"
	"github.com/dpsql/dpsql/protect"
)

// Config is what the owner sets for a service. Zero fields take the defaults.
type Config struct {
	// Path is the database file. The service holds it; analysts never do.
	Path string
	// MaxBodyBytes bounds a request's body (default 64 KiB): a larger one is
	// refused with 413 before anything runs.
	MaxBodyBytes int64
	// MaxRows bounds the rows one response carries (default 10,000); the
	// response says when it was truncated.
	MaxRows int
	// StatementTimeout stops a statement that runs longer (default 30s): an
	// availability limit, not a privacy boundary. A DP statement is charged
	// when it is accepted, before it reads anything; stopped after that (by
	// the timeout or a client that goes away) it keeps its charge and
	// releases nothing. An answer computed before the client went away is
	// charged all the same.
	StatementTimeout time.Duration
	// Rate and Burst limit each account's requests (token bucket; default 10
	// per second, bursts of 20). Over the limit: 429, nothing run.
	Rate  float64
	Burst int
}

func (c *Config) defaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.MaxRows <= 0 {
		c.MaxRows = 10000
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 30 * time.Second
	}
	if c.Rate <= 0 {
		c.Rate = 10
	}
	if c.Burst <= 0 {
		c.Burst = 20
	}
}

// Server is the analyst service of one database file. Its Handler serves
// the API and the web page; it holds the file's connections until Close.
type Server struct {
	cfg    Config
	db     *sql.DB // read-only: the chain, the ledger rows of a scope
	ledger *ledger.Ledger
	engine *protect.Engine
	book   *book
	// policies are the tables' policies for GET /v1/tables, replayed from
	// the chain and kept while its head does not move.
	policies policyCache

	mu       sync.Mutex
	analysts map[string]*sql.DB      // analyst connections per scope
	limits   map[int64]*rate.Limiter // per account (its add record's id)
}

// New opens the service of cfg.Path: it checks the ledger's whole chain and
// replays the accounts it holds.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg.defaults()
	if cfg.Path == "" {
		return nil, errors.New("serve: no database file given")
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, err
	}
	cfg.Path = abs
	if st, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	} else if st.IsDir() {
		return nil, fmt.Errorf("serve: %s is a directory, not a database file", abs)
	}
	q := url.Values{}
	q.Set("_query_only", "1")
	q.Set("_busy_timeout", "10000")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	s := &Server{cfg: cfg, db: db, book: &book{db: db}, analysts: map[string]*sql.DB{}, limits: map[int64]*rate.Limiter{}}
	if err := s.book.refresh(ctx); err != nil {
		db.Close()
		if errors.Is(err, ledger.ErrNoLedger) {
			return nil, fmt.Errorf("serve: %s has no ledger: create a budget scope first (dpsql init %s --scope NAME --mu 1): %w", cfg.Path, cfg.Path, err)
		}
		return nil, fmt.Errorf("serve: %w", err)
	}
	if s.ledger, err = ledger.OpenLedger(abs); err != nil {
		db.Close()
		return nil, err
	}
	if s.engine, err = protect.EngineFor(abs); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// ActiveAccounts returns how many accounts the service accepts now.
func (s *Server) ActiveAccounts() int { return s.book.active() }

// Close closes the service's connections to the file.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, db := range s.analysts {
		errs = append(errs, db.Close())
	}
	s.analysts = map[string]*sql.DB{}
	errs = append(errs, s.engine.Release(), s.db.Close())
	return errors.Join(errs...)
}

// Handler returns the service's routes:
//
//	GET  /            the analysts' web page
//	POST /v1/query    run one statement: {"sql": "..."}
//	GET  /v1/budget   the account's scope: budget, spent, remaining
//	GET  /v1/ledger   the ledger entries of the account's scope
//	GET  /v1/tables   what the account may query: protected tables and their policies, public tables
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", servePage)
	mux.HandleFunc("POST /v1/query", s.authed(s.query))
	mux.HandleFunc("GET /v1/budget", s.authed(s.budget))
	mux.HandleFunc("GET /v1/ledger", s.authed(s.ledgerEntries))
	mux.HandleFunc("GET /v1/tables", s.authed(s.tables))
	for ep, allow := range map[string]string{"/v1/query": "POST", "/v1/budget": "GET", "/v1/ledger": "GET", "/v1/tables": "GET"} {
		mux.HandleFunc(ep, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, CodeBadRequest, fmt.Sprintf("%s takes %s, not %s", ep, allow, r.Method))
		})
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeBadRequest, fmt.Sprintf("no API endpoint %s %s: use POST /v1/query, GET /v1/budget, GET /v1/ledger or GET /v1/tables", r.Method, r.URL.Path))
	})
	return securityHeaders(mux)
}

// securityHeaders keeps the page out of frames and other origins' scripts.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// limiter returns the account's token bucket.
func (s *Server) limiter(a *Account) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limits[a.ID]
	if !ok {
		l = rate.NewLimiter(rate.Limit(s.cfg.Rate), s.cfg.Burst)
		s.limits[a.ID] = l
	}
	return l
}

// analystDB returns the analyst connections of scope (ext.OpenAnalyst).
func (s *Server) analystDB(scope string) (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.analysts[scope]; ok {
		return db, nil
	}
	db, err := ext.OpenAnalyst(s.cfg.Path, scope)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	s.analysts[scope] = db
	return db, nil
}
