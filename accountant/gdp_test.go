package accountant

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/dpsql/dpsql/mechanism"
)

// Reference values from testdata/gdp_reference.py (mpmath, 40 digits).
func TestDeltaReference(t *testing.T) {
	tests := []struct{ mu, eps, want float64 }{
		{1, 1, 0.1269367375066439458},
		{0.5, 0, 0.19741265136584744848},
		{0.5016, 2, 0.000010017907415998210243},
		{2, 3, 0.18381307654447215597},
		{0.1, 0.5, 6.8565824558387371436e-9},
		{5, 10, 0.61662373041021237369},
		{0.01, 0.05, 5.4814402007468725614e-10},
	}
	for _, tt := range tests {
		got, err := Delta(tt.mu, tt.eps)
		if err != nil {
			t.Fatal(err)
		}
		if rel := math.Abs(got-tt.want) / tt.want; rel > 1e-9 {
			t.Errorf("Delta(mu=%v, eps=%v) = %.17g, want %.17g (rel err %.2g)", tt.mu, tt.eps, got, tt.want, rel)
		}
	}
}

func TestLogPhiReference(t *testing.T) {
	tests := []struct{ x, want float64 }{
		{-5, -15.0649983939887257360837},
		{-20, -203.9171553710972639368045},
		{-37, -689.0305855768905936008722},
		{-40, -804.6084420137537881666068},
		{-100, -5005.524208694205088626302},
		{0, math.Log(0.5)},
		{3, math.Log(distuv.UnitNormal.CDF(3))},
	}
	for _, tt := range tests {
		if got := LogPhi(tt.x); math.Abs(got-tt.want) > 1e-12*math.Abs(tt.want) {
			t.Errorf("LogPhi(%v) = %.17g, want %.17g", tt.x, got, tt.want)
		}
	}
	// Continuity where the implementation switches method.
	if a, b := LogPhi(-30-1e-9), LogPhi(-30+1e-9); math.Abs(a-b) > 1e-6 {
		t.Errorf("LogPhi jumps at -30: %v vs %v", a, b)
	}
}

// TestDeltaByIntegration derives delta(eps) independently, as the hockey-stick
// divergence E_P[(1 - e^eps q/p)_+] between N(mu,1) and N(0,1), by quadrature.
func TestDeltaByIntegration(t *testing.T) {
	for _, mu := range []float64{0.3, 1, 2.5} {
		for _, eps := range []float64{0.1, 1, 3} {
			// The loss log(p/q) = mu*x - mu^2/2 exceeds eps for x > x0.
			x0 := eps/mu + mu/2
			f := func(x float64) float64 {
				p := distuv.Normal{Mu: mu, Sigma: 1}.Prob(x)
				q := distuv.UnitNormal.Prob(x)
				return p - math.Exp(eps)*q
			}
			want := quad.Fixed(f, x0, x0+40, 2000, nil, 0)
			got, _ := Delta(mu, eps)
			if math.Abs(got-want) > 1e-9*want+1e-15 {
				t.Errorf("Delta(%v, %v) = %.12g, quadrature gives %.12g", mu, eps, got, want)
			}
		}
	}
}

func TestPublishedConversions(t *testing.T) {
	// Seed 003, Appendix E: mu = 0.5016 corresponds to (epsilon = 2, delta = 1e-5).
	eps, err := Epsilon(0.5016, 1e-5)
	if err != nil || math.Abs(eps-2) > 1e-3 {
		t.Errorf("Epsilon(0.5016, 1e-5) = %v, %v; want 2.000 (NeuroMixGDP (Li, Cao, Yao, arXiv:2202.06467) Appendix E)", eps, err)
	}
	mu, err := Mu(2, 1e-5)
	if err != nil || math.Abs(mu-0.50155168916965662356) > 1e-9*mu {
		t.Errorf("Mu(2, 1e-5) = %.15g, %v; want 0.501551689169657 (mpmath)", mu, err)
	}
	// Analytic Gaussian mechanism (Balle and Wang 2018): sigma = 3.7306 for
	// (epsilon = 1, delta = 1e-5) and sensitivity 1.
	mu, err = Mu(1, 1e-5)
	if err != nil || math.Abs(1/mu-3.7306) > 5e-5 {
		t.Errorf("analytic Gaussian sigma = %v, %v; want 3.7306", 1/mu, err)
	}
	if math.Abs(mu-0.26805112321129421922) > 1e-9*mu {
		t.Errorf("Mu(1, 1e-5) = %.15g, want 0.268051123211294", mu)
	}
}

func TestRoundTrips(t *testing.T) {
	for _, mu := range []float64{0.01, 0.1, 0.5, 1, 2, 5} {
		for _, d := range []float64{1e-12, 1e-9, 1e-5, 1e-2} {
			eps, err := Epsilon(mu, d)
			if err != nil {
				t.Fatal(err)
			}
			if eps == 0 {
				if d0, _ := Delta(mu, 0); d0 > d {
					t.Errorf("Epsilon(%v,%v)=0 but delta(0)=%v", mu, d, d0)
				}
				continue
			}
			back, _ := Delta(mu, eps)
			if math.Abs(back-d) > 1e-9*d {
				t.Errorf("Delta(%v, Epsilon(%v, %v)) = %.12g", mu, mu, d, back)
			}
			m2, err := Mu(eps, d)
			if err != nil || math.Abs(m2-mu) > 1e-9*mu {
				t.Errorf("Mu(Epsilon(mu=%v, %v)) = %.12g, %v", mu, d, m2, err)
			}
		}
	}
}

func TestCompose(t *testing.T) {
	if got := Compose(0.3, 0.4); math.Abs(got-0.5) > 1e-15 {
		t.Errorf("Compose(0.3, 0.4) = %v, want 0.5", got)
	}
	// k identical Gaussians: sqrt(k) mu.
	mus := make([]float64, 100)
	for i := range mus {
		mus[i] = 0.1
	}
	if got := Compose(mus...); math.Abs(got-1) > 1e-12 {
		t.Errorf("Compose(100 x 0.1) = %v, want 1", got)
	}
	if got := GaussianMu(2, 4); got != 0.5 {
		t.Errorf("GaussianMu(2, 4) = %v", got)
	}
}

func TestConversionErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"mu=0", second(Delta(0, 1))},
		{"mu<0", second(Delta(-1, 1))},
		{"mu=NaN", second(Delta(nan, 1))},
		{"eps<0", second(Delta(1, -1))},
		{"eps=Inf", second(Delta(1, inf))},
		{"delta=0", second(Epsilon(1, 0))},
		{"delta=1", second(Epsilon(1, 1))},
		{"delta NaN", second(Epsilon(1, nan))},
		{"mu eps=0", second(Mu(0, 1e-5))},
		{"mu delta>1", second(Mu(1, 2))},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func second(_ float64, err error) error { return err }

func TestMechanismGDPMu(t *testing.T) {
	tests := []struct {
		m    mechanism.Mechanism
		want float64
	}{
		{mechanism.Mechanism{Kind: mechanism.KindGaussian, Sensitivity: 2, Sigma: 4}, 0.5},
		{mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.3, Steps: 4}, 0.6},
		{mechanism.Mechanism{Kind: mechanism.KindGaussian, Mu: 0.3, Neighbours: mechanism.ReplaceOne}, 0.3}, // stated for replacement, charged as stated
		{mechanism.Mechanism{Kind: mechanism.KindExternal, Mu: 0.25}, 0.25},
		// CLT value of NeuroMixGDP (arXiv:2202.06467) Theorem E.2: q sqrt(T) sqrt(e^(1/sigma^2) - 1).
		{mechanism.Mechanism{Kind: mechanism.KindSubsampledGaussian, Q: 0.01, Sigma: 1, Steps: 10000}, math.Sqrt(math.E - 1)},
		{mechanism.Mechanism{Kind: mechanism.KindLaplace, Sensitivity: 1, Epsilon: 1}, math.Inf(1)},
	}
	for _, tt := range tests {
		if err := tt.m.Validate(); err != nil {
			t.Fatalf("%+v: %v", tt.m, err)
		}
		if got := tt.m.GDPMu(); math.Abs(got-tt.want) > 1e-12 && got != tt.want {
			t.Errorf("%+v: GDPMu = %v, want %v", tt.m, got, tt.want)
		}
	}
}

func TestParseMechanismErrors(t *testing.T) {
	for _, js := range []string{
		`{}`, `not json`, `{"mechanism":"gaussian"}`, `{"mechanism":"gaussian","mu":-1}`,
		`{"mechanism":"subsampled_gaussian","q":1.5,"sigma":1,"steps":1}`,
		`{"mechanism":"subsampled_gaussian","q":0.1,"sigma":0,"steps":1}`,
		`{"mechanism":"subsampled_gaussian","q":0.1,"sigma":1,"steps":0}`,
		`{"mechanism":"laplace","epsilon":0}`, `{"mechanism":"magic","mu":1}`,
		`{"mechanism":"gaussian","mu":1,"neighbours":"swap"}`,
	} {
		if _, err := mechanism.Parse([]byte(js)); err == nil {
			t.Errorf("ParseMechanism(%s): no error", js)
		}
	}
}
