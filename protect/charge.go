package protect

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dpsql/dpsql/ledger"
	"github.com/dpsql/dpsql/mechanism"
)

// Charge before read. Whether a DP statement is charged, and how much, must
// depend only on the statement, the policies and the ledger, never on the
// protected rows: the time a read takes does depend on them (a bounded
// amount per row, see cost.go), so a statement whose charge could be stopped
// by a timeout, a cancel or a failure of its read would let an analyst learn
// a bit per statement for free. So [Engine.Query] runs in three steps:
//
//  1. accept: parse, check against the policy, price and prepare the
//     rewritten SQL, on a planning connection that never waits behind
//     another statement's read; nothing protected is read. A statement
//     whose context is done by the end of this step is not accepted and
//     charges nothing.
//  2. charge: the budget decision and the ledger row, committed before step
//     3 starts, under context.WithoutCancel: once accepted, nothing the
//     caller does stops it. Over budget, the statement is refused here, at
//     once, and nothing is read.
//  3. read, then noise: a read stopped for any reason returns a *Stopped;
//     the charge stands, nothing is released.

// Stopped is the error of a DP statement stopped after it was accepted (by
// a timeout, a cancel, a client that went away, an interrupt or a failed
// read): its charge had committed and stands; nothing was released.
type Stopped struct {
	Receipt ledger.Receipt
	// Epsilon and Delta are the statement's budget when OPTIONS gave it as
	// (epsilon, delta); both 0 when it was given as mu.
	Epsilon, Delta float64
	Err            error
}

func (e *Stopped) Error() string {
	return fmt.Sprintf("the statement was stopped after its charge committed (ledger row %d, %s): it keeps its charge and released nothing: %v",
		e.Receipt.ID, e.Cost(), e.Err)
}

// Cost says what the statement was charged, in the terms its OPTIONS gave:
// "mu 0.5", or "epsilon 1, delta 1e-06" (with the charge's mu when the noise
// was Gaussian; Laplace noise has no finite mu, which is never printed), as
// mechanism.Cost prints a ledger entry everywhere else.
func (e *Stopped) Cost() string {
	c := mechanism.Cost{Mu: e.Receipt.Mu, Epsilon: e.Epsilon, Delta: e.Delta}
	if e.Epsilon <= 0 && !c.Finite() { // not from a protected-mode plan: the scope's epsilon is all there is
		return fmt.Sprintf("no finite mu; the scope's epsilon spent is now %g at delta %g", e.Receipt.Epsilon, e.Receipt.Delta)
	}
	return c.String()
}

func (e *Stopped) Unwrap() error { return e.Err }

// accept parses, checks and prices a statement on a planning connection.
func (e *Engine) accept(ctx context.Context, scope, query string) (*plan, error) {
	conn, err := e.meta.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	pl, err := e.plan(ctx, conn, scope, query)
	if err != nil {
		return nil, err
	}
	if err := prepareAll(ctx, conn, pl); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("the statement was stopped before it was accepted; nothing was charged: %w", err)
	}
	return pl, nil
}

// prepareAll prepares the statement's SQL (and each query of its own: a
// histogram's, a distinct count's) under the execution authorizer, reading nothing: a statement SQLite
// cannot prepare, or that asks for a read the checker did not approve, fails
// here, before it is charged, and never after.
func prepareAll(ctx context.Context, conn *sql.Conn, pl *plan) error {
	texts := []string{rewrite(pl)}
	for _, a := range pl.aggs {
		switch {
		case a.distinct && !a.persons:
			texts = append(texts, rewriteDistinct(pl, a))
		case histogramKind(a.kind):
			texts = append(texts, rewriteHistogram(pl, a))
		}
	}
	return authorized(conn, pl, func(denied *string) error {
		for _, text := range texts {
			if pl.join != nil && (pl.join.prot != nil || pl.join.index != "") {
				if err := checkJoinPlan(ctx, conn, text, pl.join.seekMode()); err != nil { // pjoin.go
					return err
				}
			}
			st, err := conn.PrepareContext(ctx, text)
			if err != nil {
				if *denied != "" {
					return fmt.Errorf("protect: internal error, the rewritten statement asks for a read the checker did not approve (%s); nothing was charged: %w", *denied, err)
				}
				return fmt.Errorf("protect: the rewritten statement cannot be prepared; nothing was charged: %w", err)
			}
			st.Close()
		}
		return nil
	})
}

// charge commits an accepted statement's charge; the caller's context cannot
// stop it. The budget decision is made first without the write lock (Decide)
// and reused by Commit unless another charge moved the chain in between.
func (e *Engine) charge(ctx context.Context, scope, query string, pl *plan) (ledger.Receipt, error) {
	ctx = context.WithoutCancel(ctx)
	l, err := ledger.OpenLedger(e.path)
	if err != nil {
		return ledger.Receipt{}, err
	}
	d, err := l.Decide(ctx, ledger.Charge{Scope: scope, Mechanism: pl.mech, Details: pl.details, Query: query})
	if err != nil {
		return ledger.Receipt{}, err
	}
	return l.Commit(ctx, d, nil)
}

// readAccepted reads an accepted (charged) statement's groups on a read
// connection.
func (e *Engine) readAccepted(ctx context.Context, pl *plan) ([]group, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return e.readAll(ctx, conn, pl)
}
