package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Status is one row of dp_budget_status. The row of [accountant.FileScope] is
// the total over every scope of the file; its MuBudget and MuRemaining are
// +Inf when the file has no cap.
type Status struct {
	Scope           string
	MuBudget        float64
	MuSpent         float64
	MuRemaining     float64
	EpsilonSpent    float64
	Delta           float64
	EpsilonBudget   sql.NullFloat64
	EpsilonRigorous sql.NullFloat64 // set once the scope holds other than Gaussian entries: its guarantee is then (epsilon, delta), not a mu curve
	Entries         int64           // charges
	Neighbours      string          // the scope's neighbour relation, mechanism.AddRemove or ReplaceOne
}

func orInf(x sql.NullFloat64) float64 {
	if x.Valid {
		return x.Float64
	}
	return math.Inf(1)
}

// ReadStatus reads a scope's row of dp_budget_status (all scopes when scope is "").
func ReadStatus(ctx context.Context, db Queryer, scope string) (Status, error) {
	sts, err := ReadStatuses(ctx, db, scope)
	if err != nil {
		return Status{}, err
	}
	if len(sts) == 0 {
		return Status{}, fmt.Errorf("%w %q", ErrUnknownScope, scope)
	}
	return sts[0], nil
}

// CheckStatusView checks that dp_budget_status may be read as dpsql's: the
// file has a ledger (ErrNoLedger), of a schema version this dpsql reads
// (ErrNewerSchema), and the view's SQL is the one dpsql writes at that
// version. What the view shows is only as good as its SQL: a look-alike view
// could show any budget. (Its figures, dp_scope_state's, are checked against
// the chain by Verify and by every charge.) Read the view only after it.
func CheckStatusView(ctx context.Context, db Queryer) error {
	_, err := statusVersion(ctx, db)
	return err
}

// statusVersion is CheckStatusView, returning the schema version.
func statusVersion(ctx context.Context, db Queryer) (int, error) {
	v, has, err := schemaVersion(ctx, db)
	if err != nil {
		return v, err
	}
	if !has {
		return v, ErrNoLedger
	}
	if err := checkStatusView(ctx, db, v); err != nil {
		if errors.Is(err, ErrNewerSchema) {
			return v, err
		}
		return v, fmt.Errorf("refusing to read dp_budget_status (run `dpsql audit verify`): %w", err)
	}
	return v, nil
}

// ReadStatuses reads dp_budget_status, one scope or all (scope == ""),
// once CheckStatusView passes.
func ReadStatuses(ctx context.Context, db Queryer, scope string) ([]Status, error) {
	v, err := statusVersion(ctx, db)
	if err != nil {
		return nil, err
	}
	nb := `'add_remove'`
	if v >= 1 {
		nb = `neighbours`
	}
	q := `SELECT scope, mu_budget, mu_spent, mu_remaining, epsilon_spent, delta, epsilon_budget, epsilon_rigorous, entries, ` + nb + ` FROM dp_budget_status`
	var args []any
	if scope != "" {
		q += ` WHERE scope = ?`
		args = append(args, scope)
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY scope = '*', scope`, args...) // the file's total last
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, ErrNoLedger
		}
		return nil, err
	}
	defer rows.Close()
	var out []Status
	for rows.Next() {
		var s Status
		var budget, remaining sql.NullFloat64
		if err := rows.Scan(&s.Scope, &budget, &s.MuSpent, &remaining, &s.EpsilonSpent, &s.Delta, &s.EpsilonBudget, &s.EpsilonRigorous, &s.Entries, &s.Neighbours); err != nil {
			return nil, err
		}
		// NULL: the file's total without a cap.
		s.MuBudget, s.MuRemaining = orInf(budget), orInf(remaining)
		out = append(out, s)
	}
	return out, rows.Err()
}
