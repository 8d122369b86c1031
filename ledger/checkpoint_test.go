package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
)

// checkpointCharges makes n charges in scope "default" of l, cycling over a
// Gaussian (with its samplers' error), a Laplace and a protected statement
// with partition selection, each a little different from the last.
func checkpointCharges(t *testing.T, l *Ledger, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		f := 1 + 0.01*float64(i%7)
		var c Charge
		switch i % 3 {
		case 0:
			c = Charge{Mechanism: mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.05 * f}, Details: mechanism.Gaussian{Dim: 1, NoiseTV: 0x1p-125}}
		case 1:
			c = Charge{Mechanism: mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 0.05 * f}}
		default:
			c = Charge{Mechanism: mechanism.Mechanism{Kind: mechanism.KindComposite, Parts: []mechanism.Mechanism{
				{Kind: mechanism.KindGaussianInf, Mu: 0.03 * f, Delta: 1e-10}, {Kind: mechanism.KindGaussian, Mu: 0.02 * f}}}}
		}
		c.Scope = "default"
		if _, err := l.Charge(ctx, c, nil); err != nil {
			t.Fatalf("charge %d: %v", i, err)
		}
	}
}

// reopen closes l's connection and opens the file afresh, as another
// process would: nothing in memory.
func reopen(t *testing.T, path string) *Ledger {
	t.Helper()
	if err := ReleaseLedger(path); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// figuresOf returns scope's status and the rigorous epsilon of its entries,
// as l computes them.
func figuresOf(t *testing.T, l *Ledger, scope string) (Status, float64) {
	t.Helper()
	st, err := l.Remaining(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.ScopeEpsilon(context.Background(), scope, st.Delta)
	if err != nil {
		t.Fatal(err)
	}
	return st, e
}

// A charge writes checkpoints; a process that opens the file resumes from
// the last (it reads no row before it) and computes exactly the state a
// process charging from row 1 computes; Verify recomputes every checkpoint.
func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	l, db, path := newLedger(t, mustBudget(t, "default", 3, 0, 1e-5))
	checkpointCharges(t, l, 60)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM dp_ledger WHERE kind = ?`, EventCheckpoint).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("%d checkpoints after 60 charges, 40 of them not Gaussian", n)
	}
	live, liveEps := figuresOf(t, l, "default")
	rep, err := VerifyAt(ctx, db, nil)
	if err != nil || rep.Checkpoints != n || rep.Charges != 60 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}

	// A new process resumes from the last checkpoint: same figures, bit
	// for bit, as the process that charged, and as one that reads every
	// row (the full recomputation).
	l = reopen(t, path)
	resumed, resumedEps := figuresOf(t, l, "default")
	if resumed != live || resumedEps != liveEps {
		t.Errorf("resumed: %+v, %v; the charging process had %+v, %v", resumed, resumedEps, live, liveEps)
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	full, err := computeState(rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	fst, _ := full.scopes["default"].status("default")
	if fst.EpsilonRigorous != live.EpsilonRigorous || fst.MuSpent != live.MuSpent {
		t.Errorf("recomputed from row 1: %+v; the charging process had %+v", fst, live)
	}
	// And it charges on from there exactly as the first process would.
	checkpointCharges(t, l, 20)
	rows, _ = ReadLedger(ctx, db)
	full, _ = computeState(rows, nil)
	st2, eps2 := figuresOf(t, l, "default")
	fst, _ = full.scopes["default"].status("default")
	if fst.EpsilonRigorous != st2.EpsilonRigorous || fst.Entries != 80 {
		t.Errorf("after resuming and charging: %+v (%v); recomputed %+v", st2, eps2, fst)
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
}

// A resuming process reads only what follows the last checkpoint.
func TestResumeReadsFromCheckpoint(t *testing.T) {
	ctx := context.Background()
	l, db, path := newLedger(t, mustBudget(t, "default", 3, 0, 1e-5))
	checkpointCharges(t, l, 40)
	l = reopen(t, path)
	r, ok, err := lastCheckpoint(ctx, db)
	if err != nil || !ok {
		t.Fatalf("no checkpoint: %v", err)
	}
	fs, err := resumeState(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var head int64
	db.QueryRow(`SELECT max(id) FROM dp_ledger`).Scan(&head)
	if fs.head.ID != head || fs.sinceRows != int(head-r.ID) {
		t.Errorf("resumed at %v, %d rows since the checkpoint at %d; head %d", fs.head, fs.sinceRows, r.ID, head)
	}
	_ = l
}

// A composition kept for the checkpoint that does not match it is not
// used: the process recomputes from row 1 (its figures are right) and
// Verify names the disagreement.
func TestCheckpointTampered(t *testing.T) {
	ctx := context.Background()
	l, db, path := newLedger(t, mustBudget(t, "default", 3, 0, 1e-5))
	checkpointCharges(t, l, 40)
	want, wantEps := figuresOf(t, l, "default")
	for name, tamper := range map[string]string{
		"flipped byte": `UPDATE dp_scope_state SET pld = substr(pld, 1, 200) || X'FF' || substr(pld, 202) WHERE scope = 'default'`,
		"dropped":      `UPDATE dp_scope_state SET pld = NULL WHERE scope = 'default'`,
	} {
		t.Run(name, func(t *testing.T) {
			var saved []byte
			if err := db.QueryRow(`SELECT pld FROM dp_scope_state WHERE scope = 'default'`).Scan(&saved); err != nil {
				t.Fatal(err)
			}
			defer db.Exec(`UPDATE dp_scope_state SET pld = ? WHERE scope = 'default'`, saved)
			if _, err := db.Exec(tamper); err != nil {
				t.Fatal(err)
			}
			if _, err := resumeState(ctx, db, nil); !errors.Is(err, errReplay) {
				t.Errorf("resumed from a tampered composition: %v", err)
			}
			l = reopen(t, path)
			got, gotEps := figuresOf(t, l, "default")
			if got != want || gotEps != wantEps {
				t.Errorf("figures %+v %v, want %+v %v", got, gotEps, want, wantEps)
			}
			if _, err := VerifyAt(ctx, db, nil); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "checkpoint") {
				t.Errorf("verify: %v", err)
			}
		})
	}
}

// A checkpoint row whose record disagrees with the rows before it, with its
// hash recomputed (a forged checkpoint, the chain rewritten from there), is
// named by Verify.
func TestCheckpointForged(t *testing.T) {
	ctx := context.Background()
	l, db, _ := newLedger(t, mustBudget(t, "default", 3, 0, 1e-5))
	checkpointCharges(t, l, 30)
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	i := lastIndexOfKind(rows, EventCheckpoint)
	if i < 0 {
		t.Fatal("no checkpoint")
	}
	for name, forge := range map[string]func(*ckptRecord){
		"fewer entries": func(r *ckptRecord) { r.Scopes[0].Entries-- },
		"less noise":    func(r *ckptRecord) { r.Scopes[0].NoiseTV /= 2 },
		"another composition": func(r *ckptRecord) {
			r.Scopes[0].Composition = strings.Repeat("ab", 32)
		},
	} {
		// Change the record, and rewrite the chain from there.
		rec, err := parseCheckpoint(rows[i])
		if err != nil {
			t.Fatal(err)
		}
		forge(&rec)
		forged := append([]Row(nil), rows...)
		p, _ := json.Marshal(rec)
		forged[i].Params = string(p)
		for j := i; j < len(forged); j++ {
			if j > 0 {
				forged[j].PrevHash = forged[j-1].Hash
			}
			forged[j].Hash = forged[j].ComputeHash()
		}
		if _, err := checkChain(forged); err != nil {
			t.Fatalf("%s: the forged chain should link: %v", name, err)
		}
		if _, err := checkCheckpoints(ctx, db, forged); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: forged checkpoint: %v", name, err)
		}
	}
}

// Two processes charging one file in turn: each extends the state it last
// saw by the other's rows, never reading the chain from row 1 again, and
// both end with the state the whole chain gives.
func TestStateFollowsOtherProcess(t *testing.T) {
	ctx := context.Background()
	l1, db, path := newLedger(t, mustBudget(t, "default", 3, 0, 1e-5))
	l2, err := newLedgerConn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.db.Close()
	checkpointCharges(t, l1, 3)
	checkpointCharges(t, l2, 3) // l2 starts from the last checkpoint or row 1
	before := fullStates.Load()
	for range 10 {
		checkpointCharges(t, l1, 2)
		checkpointCharges(t, l2, 2)
	}
	if n := fullStates.Load() - before; n != 0 {
		t.Errorf("%d states computed from the whole chain; each process should extend what it saw", n)
	}
	rows, err := ReadLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	full, err := computeState(rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := full.scopes["default"].status("default")
	for i, l := range []*Ledger{l1, l2} {
		got, _ := figuresOf(t, l, "default")
		if got.EpsilonRigorous != want.EpsilonRigorous || got.MuSpent != want.MuSpent || got.Entries != want.Entries {
			t.Errorf("process %d: %+v, the chain gives %+v", i+1, got, want)
		}
	}
	if _, err := VerifyAt(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
}
