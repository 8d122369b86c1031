package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client talks to a service's API with one account's token.
type Client struct {
	URL   string       // the service's base URL, e.g. https://dp.example.org:8642
	Token string       // the account's bearer token
	HTTP  *http.Client // nil: http.DefaultClient
}

// APIError is an error response of the service.
type APIError struct {
	Status  int    // HTTP status
	Code    string // CodeBudgetExceeded, CodeRefused, ...
	Message string // the message the CLI prints
}

func (e *APIError) Error() string { return e.Message }

// Query runs one statement.
func (c *Client) Query(ctx context.Context, sql string) (*QueryResponse, error) {
	body, err := json.Marshal(QueryRequest{SQL: sql})
	if err != nil {
		return nil, err
	}
	var resp QueryResponse
	if err := c.do(ctx, http.MethodPost, "/v1/query", body, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Budget returns the account's scope status.
func (c *Client) Budget(ctx context.Context) (*BudgetResponse, error) {
	var resp BudgetResponse
	if err := c.do(ctx, http.MethodGet, "/v1/budget", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Ledger returns the ledger entries of the account's scope.
func (c *Client) Ledger(ctx context.Context) (*LedgerResponse, error) {
	var resp LedgerResponse
	if err := c.do(ctx, http.MethodGet, "/v1/ledger", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Tables returns what the account may query: the protected tables with
// their policies, and the public tables.
func (c *Client) Tables(ctx context.Context) (*TablesResponse, error) {
	var resp TablesResponse
	if err := c.do(ctx, http.MethodGet, "/v1/tables", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("service URL %q: %w", c.URL, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error.Code == "" {
			return &APIError{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s %s: HTTP %s: %.200s", method, path, resp.Status, data)}
		}
		return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // integers stay integers
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if qr, ok := out.(*QueryResponse); ok {
		for _, row := range qr.Rows {
			for i, v := range row {
				if n, ok := v.(json.Number); ok {
					row[i] = number(n)
				}
			}
		}
	}
	return nil
}

// number turns a JSON number into an int64 when it is written as one, else
// a float64.
func number(n json.Number) any {
	if i, err := n.Int64(); err == nil && !strings.ContainsAny(string(n), ".eE") {
		return i
	}
	f, _ := n.Float64()
	return f
}
