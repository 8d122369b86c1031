package avgmix

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dpsql/dpsql/mechanism"
	"github.com/dpsql/dpsql/release"
)

func TestNewPlanErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	base := Params{T: 100, M: 10, Mu: 1}
	with := func(f func(*Params)) Params { p := base; f(&p); return p }
	tests := []struct {
		name    string
		n, d, k int
		p       Params
		want    string // substring of the error
	}{
		{"T zero", 100, 4, 2, with(func(p *Params) { p.T = 0 }), "T must"},
		{"T negative", 100, 4, 2, with(func(p *Params) { p.T = -5 }), "T must"},
		{"mu zero", 100, 4, 2, with(func(p *Params) { p.Mu = 0 }), "mu must"},
		{"mu negative", 100, 4, 2, with(func(p *Params) { p.Mu = -1 }), "mu must"},
		{"mu NaN", 100, 4, 2, with(func(p *Params) { p.Mu = nan }), "mu must"},
		{"mu Inf", 100, 4, 2, with(func(p *Params) { p.Mu = inf }), "mu must"},
		{"m above n", 100, 4, 2, with(func(p *Params) { p.M = 101 }), "exceeds n"},
		{"m negative", 100, 4, 2, with(func(p *Params) { p.M = -1 }), "m must"},
		{"lambda negative", 100, 4, 2, with(func(p *Params) { p.Lambda = -1 }), "lambda"},
		{"lambda NaN", 100, 4, 2, with(func(p *Params) { p.Lambda = nan }), "lambda"},
		{"lambda Inf", 100, 4, 2, with(func(p *Params) { p.Lambda = inf }), "lambda"},
		{"cx negative", 100, 4, 2, with(func(p *Params) { p.Cx = -1 }), "cx"},
		{"cx NaN", 100, 4, 2, with(func(p *Params) { p.Cx = nan }), "cx"},
		{"cy Inf", 100, 4, 2, with(func(p *Params) { p.Cy = inf }), "cy"},
		{"cx tiny", 100, 4, 2, with(func(p *Params) { p.Cx = 1e-300 }), "clip bounds"},
		{"unknown sampling", 100, 4, 2, with(func(p *Params) { p.Sampling = "uniform" }), "unknown sampling"},
		{"p with poisson", 100, 4, 2, with(func(p *Params) { p.P = 0.5 }), "only used with"},
		{"hs p zero", 100, 4, 2, with(func(p *Params) { p.Sampling = Hierarchical }), "class rate"},
		{"hs p above one", 100, 4, 2, with(func(p *Params) { p.Sampling, p.P = Hierarchical, 1.5 }), "class rate"},
		{"hs p NaN", 100, 4, 2, with(func(p *Params) { p.Sampling, p.P = Hierarchical, nan }), "class rate"},
		{"hs q_k above one", 100, 4, 2, with(func(p *Params) { p.Sampling, p.P, p.M = Hierarchical, 0.3, 50 }), "exceeds 1"},
		{"n zero", 0, 4, 2, base, "n must"},
		{"n too large", MaxRows + 1, 4, 2, base, "n must"},
		{"d zero", 100, 0, 2, base, "dimensions"},
		{"k zero", 100, 4, 0, base, "dimensions"},
		{"calibrate error", 100, 4, 2, with(func(p *Params) {
			p.Calibrate = func(float64, int) (float64, error) { return 0, errors.New("over budget") }
		}), "over budget"},
		{"calibrate NaN", 100, 4, 2, with(func(p *Params) {
			p.Calibrate = func(float64, int) (float64, error) { return nan, nil }
		}), "invalid noise multiplier"},
		{"calibrate zero", 100, 4, 2, with(func(p *Params) {
			p.Calibrate = func(float64, int) (float64, error) { return 0, nil }
		}), "invalid noise multiplier"},
		{"budget below grid", 100, 4, 2, with(func(p *Params) {
			p.Calibrate = func(float64, int) (float64, error) { return 1e6, nil }
		}), "too small"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(seededNoise(t, 1), tc.n, tc.d, tc.k, tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewPlan error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := NewPlan(nil, 100, 4, 2, Params{T: 10, M: 5, Mu: 1, Sampling: Hierarchical, P: 0.5}); err == nil {
		t.Fatal("hierarchical plan without noise accepted")
	}
	if _, err := NewPlan(nil, 100, 4, 2, base); err != nil {
		t.Fatalf("Poisson plan without noise rejected: %v", err)
	}
}

// nuStarFOC solves the first-order condition of nu ln(1 + mu^2/nu^2)
// independently: with u = mu^2/nu^2 it reads ln(1+u) = 2u/(1+u), whose
// positive root does not depend on mu, so nu* = mu/sqrt(u*).
func nuStarFOC(mu float64) float64 {
	f := func(u float64) float64 { return math.Log1p(u) - 2*u/(1+u) }
	lo, hi := 1.0, 10.0 // f(1) < 0 < f(10)
	for range 200 {
		mid := (lo + hi) / 2
		if f(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return mu / math.Sqrt((lo+hi)/2)
}

func TestNuStar(t *testing.T) {
	for _, mu := range []float64{0.1, 0.5, 1, 2, 8, 50} {
		got, err := NuStar(mu)
		if err != nil {
			t.Fatal(err)
		}
		if want := nuStarFOC(mu); math.Abs(got-want) > 1e-7*mu {
			t.Errorf("NuStar(%v) = %.10g, first-order condition gives %.10g", mu, got, want)
		}
		f := func(nu float64) float64 { return nu * math.Log1p(mu*mu/(nu*nu)) }
		if f(got) < f(got*1.001) || f(got) < f(got*0.999) {
			t.Errorf("NuStar(%v) = %v is not a maximum", mu, got)
		}
	}
	// mu = 1: u* = 3.9215536345675037 (bisection in a separate script), nu* = 1/sqrt(u*).
	if got, _ := NuStar(1); math.Abs(got-0.5049762122278388) > 1e-8 {
		t.Errorf("NuStar(1) = %.12g, want 0.504976212228", got)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := NuStar(bad); err == nil {
			t.Errorf("NuStar(%v) accepted", bad)
		}
	}
}

func TestDefaultM(t *testing.T) {
	tests := []struct {
		n, T     int
		mu       float64
		sampling string
		p        float64
		want     int
	}{
		{60000, 60000, 1, Poisson, 0, 124},        // 0.50498 * sqrt(60000) = 123.69
		{50000, 50000, 0.5016, "", 0, 57},         // 0.5016 * 0.504976 * 223.607 = 56.64
		{10, 1, 8, Poisson, 0, 10},                // nu* n = 40 > n: clamped to n
		{1000, 1000000, 0.1, Poisson, 0, 1},       // 0.05 rounds to 0: clamped to 1
		{60000, 60000, 1, Hierarchical, 0.25, 62}, // 123.69 * sqrt(0.25) = 61.85
		{100, 1, 8, Hierarchical, 0.3, 30},        // clamped to floor(n p)
	}
	for _, tc := range tests {
		got, err := DefaultM(tc.n, tc.T, tc.mu, tc.sampling, tc.p)
		if err != nil || got != tc.want {
			t.Errorf("DefaultM(%d, %d, %v, %q, %v) = %d, %v; want %d", tc.n, tc.T, tc.mu, tc.sampling, tc.p, got, err, tc.want)
		}
	}
	plan, err := NewPlan(nil, 60000, 784, 10, Params{T: 60000, Mu: 1})
	if err != nil || plan.M != 124 {
		t.Fatalf("NewPlan default m = %v, %v; want 124", plan, err)
	}
	// With the default m, nu = nu* and the CLT multiplier is
	// 1/sqrt(ln(1 + u*)) = 0.79215 whatever mu is.
	if math.Abs(plan.SigmaTarget-0.7921492835684368) > 2e-3 {
		t.Errorf("SigmaTarget at m* = %v, want about 0.79215", plan.SigmaTarget)
	}
}

// TestCLTPaper checks the central-limit formulas against NeuroMixGDP (Li, Cao, Yao, arXiv:2202.06467), Appendix
// E.1.3: with T = n = 50000, mu = 0.5016 ((2, 1e-5)-DP) corresponds to
// sigma = 0.8441 when m = 64 (q sqrt(T) = 0.2862).
func TestCLTPaper(t *testing.T) {
	q, T := 64.0/50000, 50000
	if mu := CLTMu(q, T, 0.8441); math.Abs(mu-0.5016) > 1e-3 {
		t.Errorf("CLTMu = %v, paper gives 0.5016", mu)
	}
	s, err := CLTSigma(q, T, 0.5016)
	if err != nil || math.Abs(s-0.8441) > 5e-4 {
		t.Errorf("CLTSigma = %v, %v; paper gives 0.8441", s, err)
	}
	// The accountant's description gives the same figure.
	m := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: q, Sigma: 0.8441, Steps: T}
	if got := m.GDPMu(); math.Abs(got-CLTMu(q, T, 0.8441)) > 1e-12 {
		t.Errorf("accountant GDPMu = %v, CLTMu = %v", got, CLTMu(q, T, 0.8441))
	}
	// Theorem 3.1: sigma_x, sigma_y for lambda = 1 are sqrt(2) sigma.
	plan, err := NewPlan(nil, 50000, 512, 10, Params{T: T, M: 64, Mu: 0.5016})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(plan.SigmaX/math.Sqrt2-0.8441) > 2e-3 || math.Abs(plan.SigmaY/math.Sqrt2-0.8441) > 2e-3 {
		t.Errorf("sigma_x, sigma_y = %v, %v; want about sqrt(2)*0.8441 = 1.1937", plan.SigmaX, plan.SigmaY)
	}
}

func TestPlanCalibration(t *testing.T) {
	tests := []struct {
		n, d, k, T, m int
		mu, lambda    float64
		cx, cy        float64
	}{
		{60000, 784, 10, 60000, 64, 1, 1, 1, 1},
		{60000, 784, 10, 60000, 0, 0.5, 2, 3, 1},
		{1000, 3, 2, 500, 10, 4, 0.25, 0.1, 10},
		{50000, 2048, 100, 50000, 256, 8, 1, 1, 1},
	}
	for _, tc := range tests {
		plan, err := NewPlan(nil, tc.n, tc.d, tc.k, Params{T: tc.T, M: tc.m, Mu: tc.mu, Lambda: tc.lambda, Cx: tc.cx, Cy: tc.cy})
		if err != nil {
			t.Fatal(err)
		}
		// The charge is the certified multiplier: its CLT mu is the target
		// (up to rounding), and the grid costs under 1% of the noise.
		if math.Abs(plan.CLTMu-tc.mu) > 1e-12*tc.mu {
			t.Errorf("%+v: CLT mu of the plan = %v, target %v", tc, plan.CLTMu, tc.mu)
		}
		if plan.Sigma > 1.01*plan.SigmaTarget {
			t.Errorf("%+v: the grid costs more than 1%%: sigma %v for target %v", tc, plan.Sigma, plan.SigmaTarget)
		}
		if plan.Sigma < plan.SigmaTarget {
			t.Errorf("%+v: effective sigma %v below target %v", tc, plan.Sigma, plan.SigmaTarget)
		}
		// The grid slack included: mu_x = (Cx + g sqrt(d))/noise_x, mu_y likewise.
		mx := (plan.Cx + release.Grid(plan.noiseX())*math.Sqrt(float64(tc.d))) / plan.noiseX()
		my := (plan.Cy + release.Grid(plan.noiseY())*math.Sqrt(float64(tc.k))) / plan.noiseY()
		if s := 1 / math.Hypot(mx, my); math.Abs(s-plan.Sigma) > 1e-12*s {
			t.Errorf("%+v: Sigma = %v, recomputed %v", tc, plan.Sigma, s)
		}
		// lambda balances the two: sigma_y/sigma_x = lambda up to the grid slack.
		if r := plan.SigmaY / plan.SigmaX; math.Abs(r/plan.Lambda-1) > 1e-2 {
			t.Errorf("%+v: sigma_y/sigma_x = %v, lambda %v", tc, r, plan.Lambda)
		}
		want := mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: float64(plan.M) / float64(tc.n), Sigma: plan.SigmaTarget, Steps: tc.T}
		if !reflect.DeepEqual(plan.Mechanism, want) {
			t.Errorf("%+v: mechanism %+v, want %+v", tc, plan.Mechanism, want)
		}
		if err := plan.check(); err != nil {
			t.Errorf("%+v: fresh plan fails its check: %v", tc, err)
		}
	}
}

func TestPlanCalibrateHook(t *testing.T) {
	for _, sampling := range []string{Poisson, Hierarchical} {
		var gotQ float64
		var gotSteps int
		p := Params{T: 3000, M: 20, Mu: 1, Sampling: sampling, Calibrate: func(q float64, steps int) (float64, error) {
			gotQ, gotSteps = q, steps
			return 2.5, nil
		}}
		if sampling == Hierarchical {
			p.P = 0.5
		}
		plan, err := NewPlan(seededNoise(t, 2), 1000, 16, 4, p)
		if err != nil {
			t.Fatal(err)
		}
		if gotQ != plan.Q || gotSteps != plan.Steps || plan.Mechanism.Q != gotQ || plan.Mechanism.Steps != gotSteps {
			t.Errorf("%s: Calibrate saw (%v, %d), plan has (%v, %d), mechanism (%v, %d)", sampling, gotQ, gotSteps, plan.Q, plan.Steps, plan.Mechanism.Q, plan.Mechanism.Steps)
		}
		if plan.SigmaTarget != 2.5 || plan.Sigma < 2.5 || plan.Sigma > 2.5*1.01 {
			t.Errorf("%s: target %v, effective %v; want 2.5 and just above", sampling, plan.SigmaTarget, plan.Sigma)
		}
	}
}

func TestHierarchicalPlan(t *testing.T) {
	const n, k, T, m, P = 1000, 10, 20000, 30, 0.3
	plan, err := NewPlan(seededNoise(t, 3), n, 8, k, Params{T: T, M: m, Mu: 1, Sampling: Hierarchical, P: P})
	if err != nil {
		t.Fatal(err)
	}
	if want := m / (n * P); math.Abs(plan.Q-want) > 1e-15 {
		t.Errorf("q_k = %v, want m/(n p) = %v", plan.Q, want)
	}
	// T_k ~ Binomial(T, P): mean 6000, sd 64.8.
	mean, sd := T*P, math.Sqrt(T*P*(1-P))
	maxTk := 0
	for c, tk := range plan.ClassSteps {
		if math.Abs(float64(tk)-mean) > 5*sd {
			t.Errorf("T_%d = %d, want %v +- %v", c, tk, mean, 5*sd)
		}
		if n := plan.classCounts()[c]; n != tk {
			t.Errorf("T_%d = %d, but %d outputs chose class %d", c, tk, n, c)
		}
		maxTk = max(maxTk, tk)
	}
	if plan.Steps != maxTk || plan.Mechanism.Steps != maxTk {
		t.Errorf("steps = %d (mechanism %d), want max T_k = %d", plan.Steps, plan.Mechanism.Steps, maxTk)
	}
	// No bits beyond class K-1.
	for tt := range T {
		if plan.classesOf(tt)[0]>>k != 0 {
			t.Fatalf("output %d chose a class >= K", tt)
		}
	}
	// Per-class accounting costs more than the paper's uniform rate m/n over
	// T steps: (1/P) sqrt(max T_k / T) more in the CLT figure at the same
	// sigma, about 1/sqrt(P) (max T_k lies within 5 sd of P T, checked above).
	paper := CLTMu(float64(m)/n, T, plan.Sigma)
	want := math.Sqrt(float64(maxTk)/T) / P
	if r := plan.CLTMu / paper; math.Abs(r-want) > 1e-9*want || math.Abs(want-1/math.Sqrt(P)) > 0.05 {
		t.Errorf("per-class / paper CLT mu = %v, want (1/P) sqrt(max T_k/T) = %v, about %v", r, want, 1/math.Sqrt(P))
	}
	// With P = 1 every output chooses every class: Poisson sampling again.
	p1, err := NewPlan(seededNoise(t, 4), n, 8, k, Params{T: 500, M: m, Mu: 1, Sampling: Hierarchical, P: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := NewPlan(nil, n, 8, k, Params{T: 500, M: m, Mu: 1})
	if !reflect.DeepEqual(p1.Mechanism, ps.Mechanism) {
		t.Errorf("hierarchical with p = 1: %+v, Poisson: %+v", p1.Mechanism, ps.Mechanism)
	}
	// Many classes: several words per output.
	big, err := NewPlan(seededNoise(t, 5), 100000, 8, 300, Params{T: 100, M: 100, Mu: 1, Sampling: Hierarchical, P: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if err := big.check(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, tk := range big.ClassSteps {
		total += tk
	}
	if math.Abs(float64(total)-3000) > 5*math.Sqrt(3000*0.9) {
		t.Errorf("%d class choices over 100 outputs x 300 classes at p = 0.1, want about 3000", total)
	}
}

func TestPlanCheckDetectsTampering(t *testing.T) {
	fresh := func() *Plan {
		p, err := NewPlan(seededNoise(t, 6), 500, 4, 3, Params{T: 100, M: 10, Mu: 1, Sampling: Hierarchical, P: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tamper := []struct {
		name string
		f    func(*Plan)
	}{
		{"sigma charged raised", func(p *Plan) { p.Mechanism.Sigma *= 1.01 }},
		{"noise lowered", func(p *Plan) { p.SigmaX *= 0.9 }},
		{"rate charged lowered", func(p *Plan) { p.Mechanism.Q /= 2 }},
		{"m raised", func(p *Plan) { p.M = 20 }},
		{"steps lowered", func(p *Plan) { p.Mechanism.Steps = 1 }},
		{"classes dropped", func(p *Plan) { p.classes = nil }},
		{"replace-one", func(p *Plan) { p.Mechanism.Neighbours = mechanism.ReplaceOne }},
		{"sampling", func(p *Plan) { p.Sampling = "other" }},
	}
	if err := fresh().check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tamper {
		p := fresh()
		tc.f(p)
		if err := p.check(); err == nil {
			t.Errorf("%s: check passed", tc.name)
		}
	}
	var nilPlan *Plan
	if nilPlan.check() == nil {
		t.Error("nil plan passed")
	}
}
