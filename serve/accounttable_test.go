package serve_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dpsql/dpsql/serve"
)

// The attack: whoever has the file puts a view named dp_account in place of
// the table, listing an account no record made. Verify counted only tables
// named exactly dp_account, so with no account records it passed while SQL
// readers saw mallory's account.
func TestAccountViewNotVerified(t *testing.T) {
	c := newClinic(t, 5, map[string]float64{"default": 1})
	c.exec(t, `CREATE VIEW DP_ACCOUNT AS SELECT 'mallory' AS name, 'default' AS scope, 'hmac-sha256' AS hasher, '00' AS salt, '00' AS hash, '2026-01-01' AS added_at, NULL AS revoked_at, 1 AS ledger_id`)
	if _, err := serve.VerifyAccounts(context.Background(), c.owner); !errors.Is(err, serve.ErrAccountTable) {
		t.Errorf("VerifyAccounts with a view as dp_account: %v, want ErrAccountTable", err)
	}
}
