package protect_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/internal/readhook"
	"github.com/dpsql/dpsql/protect"
)

const (
	slowQuery  = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) sex, COUNT(*) AS n FROM patients GROUP BY sex`
	countQuery = `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = %g) COUNT(*) AS n FROM patients`
)

// expiring is a context whose deadline the test passes by hand (expire): a
// statement stopped at its deadline, at a moment the test chooses.
type expiring struct {
	context.Context
	done chan struct{}
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiring) expire()               { close(c.done) }
func (c *expiring) Done() <-chan struct{} { return c.done }
func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A DP statement stopped after it was accepted (cancelled, or past its
// deadline, while it reads) keeps its charge, exactly once, and releases
// nothing: whether a statement is charged depends on the statement, the
// policy and the ledger, never on how long the read takes. (Until issue 22 a
// statement stopped while it read charged nothing, and a WHERE whose running
// time depended on one row gave one bit per statement for free.) No clock:
// the read is held after its first row (of two) until the test stops it.
func TestStoppedAfterAcceptanceKeepsCharge(t *testing.T) {
	path, owner := newClinic(t, 2, `json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1)`, insertPatients(2000, func(i int) (int, string, int, any) {
		return i, []string{"F", "M"}[i%2], 20 + i%60, 18 + i%25
	}))
	a := openAnalyst(t, path)
	if _, _, err := queryAll(context.Background(), a, fmt.Sprintf(countQuery, 0.1)); err != nil {
		t.Fatal(err)
	}
	midway, remove := readhook.StopMidway()
	t.Cleanup(remove)
	type answer struct {
		rows [][]any
		err  error
	}
	for _, stop := range []string{"cancel", "deadline"} {
		before := ledgerRows(t, owner)
		var ctx context.Context
		var stopNow func()
		if stop == "cancel" {
			ctx, stopNow = context.WithCancel(context.Background())
		} else {
			e := newExpiring()
			ctx, stopNow = e, e.expire
		}
		answered := make(chan answer, 1)
		go func() {
			_, rows, err := queryAll(ctx, a, fmt.Sprintf(slowQuery, 0.2))
			answered <- answer{rows, err}
		}()
		select {
		case <-midway: // the read has scanned its first row and waits
		case r := <-answered:
			t.Fatalf("%s: the statement returned (%v, %v) before its read was under way", stop, r.rows, r.err)
		}
		if n := ledgerRows(t, owner) - before; n != 1 {
			t.Errorf("%s: a statement in its read has made %d charges, want exactly 1 (committed before the read)", stop, n)
		}
		stopNow()
		r := <-answered
		err := r.err
		if err == nil {
			t.Errorf("%s: the statement answered (%d rows): it was not stopped", stop, len(r.rows))
		}
		if n := ledgerRows(t, owner) - before; n != 1 {
			t.Errorf("%s: a statement stopped after acceptance made %d charges, want exactly 1 (err %v)", stop, n, err)
		}
		var st *protect.Stopped
		if !errors.As(err, &st) || st.Receipt.ID == 0 || !strings.Contains(err.Error(), "keeps its charge") {
			t.Errorf("%s: error %v, want a *protect.Stopped naming the charge", stop, err)
		}
		want := context.Canceled
		if stop == "deadline" {
			want = context.DeadlineExceeded
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: error %v does not wrap %v", stop, err, want)
		}
	}
}

// A statement refused before acceptance charges nothing: a context already
// done, a refused statement, one SQLite cannot prepare, and one over budget,
// which is refused at once, without waiting for any read. The last is shown
// without a clock: every read connection of the engine is held, so an
// accepted statement's read blocks until released; the over-budget refusal
// must come back while that read is still blocked, and must not itself wait
// for a read connection.
func TestRefusedBeforeAcceptanceChargesNothing(t *testing.T) {
	path, owner := newClinic(t, 2, `json_object('privacy_unit', 'pid', 'max_groups', 2, 'max_rows', 1)`, insertPatients(2000, func(i int) (int, string, int, any) {
		return i, []string{"F", "M"}[i%2], 20 + i%60, 18 + i%25
	}))
	a, b := openAnalyst(t, path), openAnalyst(t, path)
	if _, _, err := queryAll(context.Background(), a, fmt.Sprintf(countQuery, 0.1)); err != nil {
		t.Fatal(err)
	}
	before := ledgerRows(t, owner)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := queryAll(done, a, fmt.Sprintf(countQuery, 0.2)); err == nil {
		t.Error("a statement whose context was done before it started answered")
	}
	if _, _, err := queryAll(context.Background(), a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.2) pid, COUNT(*) FROM patients`); !protect.IsRefusal(err) {
		t.Errorf("refused statement: %v", err)
	}
	// SQLite cannot prepare it (substr takes at most 3 arguments): it fails
	// before it is charged.
	if _, _, err := queryAll(context.Background(), a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (mu = 0.2) COUNT(*) FROM patients WHERE substr(sex, 1, 2, 3) = 'F'`); err == nil || !strings.Contains(err.Error(), "nothing was charged") {
		t.Errorf("a statement SQLite cannot prepare: %v", err)
	}
	if n := ledgerRows(t, owner); n != before {
		t.Errorf("%d charges from statements refused before acceptance", n-before)
	}

	held := protect.HoldReads(t, path)
	waits := held.Waiting()
	type answer struct {
		rows [][]any
		err  error
	}
	accepted := make(chan answer, 1)
	go func() { // accepted and charged; its read waits for a connection
		_, rows, err := queryAll(context.Background(), a, fmt.Sprintf(countQuery, 0.2))
		accepted <- answer{rows, err}
	}()
	for held.Waiting() == waits {
		select {
		case r := <-accepted:
			t.Fatalf("the accepted statement returned (%v, %v) while every read connection was held", r.rows, r.err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	if n := ledgerRows(t, owner); n != before+1 {
		t.Fatalf("the statement blocked in its read made %d charges, want 1 (committed before the read)", n-before)
	}
	// mu 1.995 is within the scope's budget of 2 (the checker passes it)
	// but over what remains after 0.1 and 0.2: the budget decision, made
	// when the charge would be, refuses it.
	refused := make(chan error, 1)
	go func() {
		_, _, err := queryAll(context.Background(), b, fmt.Sprintf(countQuery, 1.995))
		refused <- err
	}()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-refused:
			waiting = false
		default:
			if held.Waiting() > waits+1 {
				held.Release()
				t.Fatalf("the over-budget statement waited for a read connection (then: %v)", <-refused)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if !accountant.IsBudgetExceeded(err) {
		t.Errorf("over budget: %v", err)
	}
	select {
	case r := <-accepted:
		t.Fatalf("the accepted statement returned (%v, %v) while every read connection was held", r.rows, r.err)
	default: // still blocked in its read: the refusal did not wait for it
	}
	if n := ledgerRows(t, owner); n != before+1 {
		t.Errorf("the over-budget statement changed the charges by %d, want 0", n-before-1)
	}
	held.Release()
	if r := <-accepted; r.err != nil || len(r.rows) != 1 {
		t.Errorf("the accepted statement, once its read went on: %v rows, %v", r.rows, r.err)
	}
}

// A stopped statement's message names its charge in the budget's own terms:
// epsilon and delta for one given (epsilon, delta), never the "mu +Inf" of
// Laplace noise; mu for one given mu. The read is held, not timed: the
// statement is cancelled while it waits for its read connection.
func TestStoppedMessageNamesTheBudget(t *testing.T) {
	path, owner := newClinic(t, 5, `json_object('privacy_unit', 'pid')`, insertPatients(200, func(i int) (int, string, int, any) {
		return i, []string{"F", "M"}[i%2], 20 + i%60, 18 + i%25
	}))
	a := openAnalyst(t, path)
	if _, _, err := queryAll(context.Background(), a, fmt.Sprintf(countQuery, 0.1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ options, want, law string }{
		{"epsilon = 0.5, delta = 1e-6, noise = 'laplace'", "epsilon 0.5, delta 1e-06)", "laplace"},
		{"epsilon = 0.5, delta = 1e-6, noise = 'gaussian'", "epsilon 0.5, delta 1e-06; Gaussian noise, mu ", "gaussian"},
		{"mu = 0.25", "mu 0.25)", "gaussian"},
	} {
		held := protect.HoldReads(t, path)
		waits := held.Waiting()
		before := ledgerRows(t, owner)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() {
			_, _, err := queryAll(ctx, a, `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (`+c.options+`) COUNT(*) AS n FROM patients`)
			stopped <- err
		}()
		for held.Waiting() == waits && len(stopped) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		err := <-stopped
		held.Release()
		var st *protect.Stopped
		if !errors.As(err, &st) {
			t.Fatalf("%s: %v, want a *protect.Stopped", c.options, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "Inf") {
			t.Errorf("%s: stopped statement says %q, want %q and no infinity", c.options, msg, c.want)
		}
		if n := ledgerRows(t, owner) - before; n != 1 {
			t.Errorf("%s: %d charges, want 1", c.options, n)
		}
		if law := c.law; (law == "laplace") != math.IsInf(st.Receipt.Mu, 1) {
			t.Errorf("%s: the charge's mu is %v, want %s noise", c.options, st.Receipt.Mu, law)
		}
	}
}
