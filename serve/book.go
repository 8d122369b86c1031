package serve

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/dpsql/dpsql/ledger"
)

// book is the set of accounts the service authenticates against, replayed
// from the ledger's chain and never from dp_account. It is bound to the head
// of the chain it has checked: at start it replays and checks the whole
// chain; before each authentication it reads the rows appended since (a few
// per request: the charges of other requests), checks that they hash and
// link onto that head and that the head's row is unchanged, and applies the
// account records among them. A chain that lost or changed rows the service
// has seen (a revoke record deleted, say) fails closed: every request is
// refused until the chain is whole again or the service restarts.
type book struct {
	db *sql.DB // read-only connection to the file

	mu       sync.Mutex
	head     ledger.Head
	accounts map[string]*Account // nil until the first full replay
}

// refresh brings the book up to the file's chain.
func (b *book) refresh(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	tx, err := b.db.BeginTx(ctx, nil) // one snapshot for every read below
	if err != nil {
		return err
	}
	defer tx.Rollback()
	head, err := ledger.ReadHead(ctx, tx)
	if err != nil {
		return err
	}
	if b.accounts == nil {
		as, err := readAccounts(ctx, tx)
		if err != nil {
			return fmt.Errorf("reading the accounts from the ledger: %w", err)
		}
		b.accounts, b.head = as, head
		return nil
	}
	if head.ID < b.head.ID {
		return fmt.Errorf("the ledger's chain ends at row %d, but the service has seen row %d: rows were removed (see dpsql audit verify)", head.ID, b.head.ID)
	}
	if head == b.head {
		return nil
	}
	return b.extend(ctx, tx, head)
}

// extend checks and applies the rows after b.head up to head. On error the
// book is unchanged.
func (b *book) extend(ctx context.Context, tx *sql.Tx, head ledger.Head) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash, kind, form
		FROM dp_ledger WHERE id >= ? AND id <= ? ORDER BY id`, b.head.ID, head.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	as := make(map[string]*Account, len(b.accounts))
	for k, a := range b.accounts {
		c := *a
		as[k] = &c
	}
	prev := b.head
	first := true
	for rows.Next() {
		var r ledger.Row
		if err := rows.Scan(&r.ID, &r.At, &r.Scope, &r.Mechanism, &r.Mu, &r.Params, &r.Query, &r.PrevHash, &r.Hash, &r.Kind, &r.Form); err != nil {
			return err
		}
		if first {
			if r.ID != prev.ID || r.Hash != prev.Hash || r.ComputeHash() != r.Hash {
				return fmt.Errorf("ledger row %d changed since it was checked", prev.ID)
			}
			first = false
			continue
		}
		if r.ID != prev.ID+1 || r.PrevHash != prev.Hash || r.ComputeHash() != r.Hash {
			return fmt.Errorf("ledger row %d does not chain onto row %d", r.ID, prev.ID)
		}
		if r.Kind == ledger.EventAccount {
			if r.Mu != 0 {
				return fmt.Errorf("ledger row %d: an account record spends mu %g", r.ID, r.Mu)
			}
			if err := applyAccount(as, r); err != nil {
				return err
			}
		}
		prev = ledger.Head{ID: r.ID, Hash: r.Hash}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if first || prev != head {
		return fmt.Errorf("the chain does not reach its head %s", head)
	}
	b.accounts, b.head = as, head
	return nil
}

// authenticate returns the active account whose token this is.
func (b *book) authenticate(ctx context.Context, token string) (*Account, error) {
	if err := b.refresh(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var found *Account
	for _, a := range b.accounts {
		if a.Active() && a.matches(token) {
			found = a
		}
	}
	return found, nil
}

// active returns how many accounts are active.
func (b *book) active() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, a := range b.accounts {
		if a.Active() {
			n++
		}
	}
	return n
}
