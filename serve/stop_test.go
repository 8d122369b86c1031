package serve_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpsql/dpsql/internal/readhook"
	"github.com/dpsql/dpsql/serve"
)

const slowQuery = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) sex, COUNT(*) AS n FROM patients GROUP BY sex`

// stopMidway holds every protected read after its first row (of two, for
// the statements here) until its statement's context is done, for the rest
// of the test: a stop then falls in the middle of the read, on any machine.
func stopMidway(t *testing.T) <-chan struct{} {
	reached, remove := readhook.StopMidway()
	t.Cleanup(remove)
	return reached
}

// A DP statement still reading at the service's timeout is stopped (504,
// code timeout) and keeps its charge, exactly once: the charge committed
// when the statement was accepted, before the read, and nothing the read
// does (a timeout included) can stop it. A plain statement past the timeout
// is stopped too and spends nothing. (Until issue 22 a timed-out statement
// charged nothing, which let a WHERE whose running time depends on one row
// read that row's bit for free.) The read is held mid-way until the
// timeout, so the timeout need only be longer than accepting a statement.
func TestStatementTimeoutChargedOnce(t *testing.T) {
	c := newClinic(t, 2000, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	midway := stopMidway(t)
	_, hs := c.start(t, serve.Config{StatementTimeout: 2 * time.Second})
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(slowQuery, 0.5),
		`SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.5) sex, AVG(bmi, contribution_bounds_per_group => (10, 60)) FROM patients GROUP BY sex`,
	} {
		before := c.charges(t, "a")
		_, err := client(hs, tok).Query(ctx, q)
		select {
		case <-midway:
		default:
			t.Errorf("%.60s: stopped (%v) before its read was under way", q, err)
		}
		if apiCode(err) != serve.CodeTimeout || !strings.Contains(err.Error(), "keeps its charge") {
			t.Errorf("%.60s: %v (%s), want a timeout that keeps its charge", q, err, apiCode(err))
		}
		if n := c.charges(t, "a") - before; n != 1 {
			t.Errorf("%.60s: a timed-out statement made %d charges, want exactly 1", q, n)
		}
	}
	before := c.ledger(t)
	_, err := client(hs, tok).Query(ctx, `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s) SELECT count(*) FROM s`)
	if apiCode(err) != serve.CodeTimeout {
		t.Errorf("endless plain statement: %v (%s), want a timeout", err, apiCode(err))
	}
	if c.ledger(t) != before {
		t.Error("a plain statement charged")
	}
}

// A client that goes away while its DP statement reads (the request's
// context is cancelled) leaves the statement charged exactly once. The
// client leaves once the read is under way (held after its first row).
func TestClientGoneDuringReadKeepsCharge(t *testing.T) {
	c := newClinic(t, 2000, map[string]float64{"a": 5})
	tok := c.account(t, "alice", "a")
	midway := stopMidway(t)
	_, hs := c.start(t, serve.Config{})
	before := c.charges(t, "a")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-midway
		cancel()
	}()
	_, err := client(hs, tok).Query(ctx, fmt.Sprintf(slowQuery, 0.5))
	if err == nil {
		t.Fatal("the statement answered before the client went away")
	}
	// The handler finishes on its own after the client has gone: Close
	// waits for it.
	hs.Close()
	if n := c.charges(t, "a") - before; n != 1 {
		t.Errorf("a statement whose client went away while it read made %d charges, want exactly 1", n)
	}
}

// 20 concurrent statements of mu = 1 on a scope of mu = 3: the 9 that fit
// are answered, the other 11 are refused with budget_exceeded at once,
// without waiting for reads they never start, and none times out.
func TestContentionAnswersOrRefusesPromptly(t *testing.T) {
	c := newClinic(t, 1000000, map[string]float64{"a": 3 * (1 + 1e-9)})
	tok := c.account(t, "alice", "a")
	_, hs := c.start(t, serve.Config{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	var slowestRefusal, slowestAnswer time.Duration
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			_, err := client(hs, tok).Query(context.Background(), fmt.Sprintf(dpCount, 1.0))
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			codes[apiCode(err)]++
			switch apiCode(err) {
			case "":
				slowestAnswer = max(slowestAnswer, took)
			case serve.CodeBudgetExceeded:
				slowestRefusal = max(slowestRefusal, took)
			default:
				t.Errorf("%v (%s)", err, apiCode(err))
			}
		}()
	}
	wg.Wait()
	t.Logf("slowest refusal %v, slowest answer %v", slowestRefusal, slowestAnswer)
	if codes[""] != 9 || codes[serve.CodeBudgetExceeded] != 11 {
		t.Errorf("answers by code: %v, want 9 answered and 11 budget_exceeded", codes)
	}
	// The 9 reads share the machine's cores; a refusal waits for none of
	// them (before issue 22 each waited for its own read).
	if slowestRefusal > slowestAnswer/2 {
		t.Errorf("the slowest budget refusal took %v, the slowest answer %v: refusals waited for reads", slowestRefusal, slowestAnswer)
	}
	if n := c.charges(t, "a"); n != 9 {
		t.Errorf("%d charges, want 9", n)
	}
}
