package protect_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/dpsql/dpsql/ext"
)

// Analysts on several connections at once: every DP statement is charged
// exactly once, every raw read refused, nothing else charged.
func TestConcurrentAnalysts(t *testing.T) {
	path, owner := newClinic(t, 100, `json_object('privacy_unit', 'pid')`,
		insertPatients(500, func(i int) (int, string, int, any) { return i, []string{"F", "M"}[i%2], 30, 25.0 }))
	a, err := ext.OpenAnalyst(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetMaxOpenConns(4)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				q := `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.1) sex, COUNT(*) FROM patients GROUP BY sex`
				if (g+i)%2 == 1 {
					q = `SELECT sex FROM patients`
				}
				_, _, err := queryAll(ctx, a, q)
				if strings.HasPrefix(q, "SELECT sex") {
					if err == nil || !strings.Contains(err.Error(), "is protected") {
						errs <- err
					}
				} else if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ledgerRows(t, owner); n != 8 {
		t.Errorf("%d ledger rows for 8 DP statements", n)
	}
}
