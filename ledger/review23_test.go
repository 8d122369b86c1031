package ledger

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

// review23: on a scope of mu 1e6 (the samplers' cap decides) a Gaussian
// charge that Decide accepts, filling the scope to 0.9999 of the room
// recorded before it, was refused by Ledger.Charge: the room after it could
// not be computed (accountant.Room's lattice search reached its lowest
// point, a subnormal mu of 2.7e-312, whose Gaussian PLD is "non-finite").
// A room that cannot be computed now records a safe smaller figure
// (roomOf), and the search no longer goes below roomNegligible.
func TestReview23NearlyFullChargeRefused(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1e6, 0, 1e-5))
	g := func(mu float64) mechanism.Mechanism { return mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: mu} }
	comp := func(a, b, c float64) mechanism.Mechanism {
		return mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
			{Kind: mechanism.KindGaussianInf, Mu: a, Delta: 1e-10}, g(b), g(c)}}
	}
	type e struct {
		m  mechanism.Mechanism
		tv float64
	}
	hist := []e{
		{comp(1.1285707661452111, 1.1285707661452111, 0.7523805107634741), release.NoiseTVOf(200)},
		{mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Sensitivity: 1, Epsilon: 1.691104132157499, Delta: 1e-12}, 0},
		{mechanism.Mechanism{Kind: mechanism.KindTruncatedLaplace, Sensitivity: 1.0000305175781252, Sigma: 2.792205810546875, Epsilon: 0.35815400803182973, Delta: 9.999891014399137e-10, Support: 53.57615661621094}, 0},
		{g(3.5283759630839815), release.NoiseTVOf(13)},
		{comp(3.5325921580237134, 3.5325921580237134, 2.3550614386824757), release.NoiseTVOf(200)},
		{mechanism.Mechanism{Kind: mechanism.KindLaplaceInf, Sensitivity: 1, Epsilon: 4.876052958620112, Delta: 1e-12}, 0},
	}
	var rc Receipt
	var err error
	for i, x := range hist {
		if rc, err = l.Charge(ctx, Charge{Scope: "default", Mechanism: x.m, Details: map[string]any{mechanism.KeyNoiseTV: x.tv}, Query: "SELECT 1"}, nil); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
	// A scalar Gaussian call of 0.9999 of the recorded room (Decide
	// accepts it: it is below the room) is charged, and the file verifies.
	fill := rc.MuRemaining * 0.9999
	if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: g(fill), Details: map[string]any{mechanism.KeyNoiseTV: release.NoiseTVOf(1)}, Query: "SELECT 1"}, nil); err != nil {
		t.Errorf("room %v: a charge of mu %v refused: %v", rc.MuRemaining, fill, err)
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Errorf("verify: %v", err)
	}
}

// review23: a subsampled Gaussian of a very large noise multiplier (sigma
// 2.4e7, q 0.086: what a tiny scope, mu 1e-6, accepts) composes into a PLD
// whose bins hold masses above 2 (pld's build inflates them by its error
// bounds), which pld.PLD.UnmarshalBinary refused ("mass out of range"): a
// new process could not resume from the checkpoint that follows every
// subsampled charge (it replayed from row 1), and Verify called the honest
// file's kept composition a mismatch. The decoder now accepts any finite
// non-negative mass (masses are upper bounds).
func TestReview23HugeSigmaSubsampledCheckpoint(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1e-6, 0, 1e-5))
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.0862945909816091, Sigma: 2.406523594634199e+07, Steps: 1}
	if _, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: m, Query: "SELECT 1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := resumeState(ctx, db, nil); errors.Is(err, errReplay) {
		t.Errorf("a new process cannot resume from the checkpoint after an honest charge: %v", err)
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Errorf("verify of an honest file: %v", err)
	}
}

// review23: a checkpoint records every scope and rewrites every kept
// composition, so with many scopes one after every subsampled charge cost
// what all of them hold per charge (416 KB rewritten at 31 scopes). With 20
// scopes holding charges (checkpointScale 3) one follows every third
// subsampled charge; a new process resumes from it and the file verifies.
func TestReview23CheckpointScalesWithScopes(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 20, 0, 1e-5))
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.01}
	for s := range 20 {
		name := "s" + strconv.Itoa(s)
		if err := l.Init(ctx, mustBudget(t, name, 20, 0, 1e-5)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Charge(ctx, Charge{Scope: name, Mechanism: lap, Query: "SELECT 1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (n int) {
		if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = 'checkpoint'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c0 := count()
	for i := range 9 {
		m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1 + 0.01*float64(i), Steps: 1}
		if _, err := l.Charge(ctx, Charge{Scope: "s0", Mechanism: m, Query: "SELECT 1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The Laplace charges left some weight since the last checkpoint, so
	// 2 or 3 checkpoints follow 9 subsampled charges (one per charge before).
	if n := count() - c0; n < 2 || n > 3 {
		t.Errorf("%d checkpoints after 9 subsampled charges in a file of 20 scopes, want 3 (one per 3)", n)
	}
	if _, err := resumeState(ctx, db, nil); err != nil {
		t.Errorf("a new process cannot resume: %v", err)
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Errorf("verify: %v", err)
	}
}

// review23 (general form of the nearly-full regression): whatever makes
// accountant.Room fail, a charge the budget check accepted is made, the
// room it records is the safe figure Room returned with its error (never
// more), and Verify, recomputing through the same rule, agrees.
func TestReview23RoomFailureNeverRefuses(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 1, 0, 1e-5))
	defer func(f func(context.Context, accountant.Budget, accountant.Spend, float64) (float64, error)) {
		accountantRoom = f
	}(accountantRoom)
	accountantRoom = func(ctx context.Context, b accountant.Budget, s accountant.Spend, tv float64) (float64, error) {
		if b.Scope == "default" && s.NonGaussian > 0 {
			return 0, errors.New("pld: non-finite value in a computed distribution")
		}
		return accountant.Room(ctx, b, s, tv)
	}
	lap := mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.1}
	rc, err := l.Charge(ctx, Charge{Scope: "default", Mechanism: lap, Query: "SELECT 1"}, nil)
	if err != nil {
		t.Fatalf("a charge the budget check accepts is refused: %v", err)
	}
	if rc.MuRemaining != 0 {
		t.Errorf("room %v recorded after a failed search, want the safe 0", rc.MuRemaining)
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Errorf("verify: %v", err)
	}
	// A stopped computation is still refused (nothing is charged).
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Charge(cctx, Charge{Scope: "default", Mechanism: lap, Query: "SELECT 1"}, nil); err == nil {
		t.Errorf("a charge whose context is done is made")
	}
}
