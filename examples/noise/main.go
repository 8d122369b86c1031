// Command noise compares scalar noise mechanisms at equal (epsilon, delta)
// and sensitivity 1: Laplace (scale 1/epsilon, pure epsilon-DP), Gaussian
// (the analytic calibration, accountant.Mu), truncated Laplace (Geng, Ding,
// Guo, Kumar, arXiv:1810.00877) and the noise optimised by release/optnoise
// (Selvi, Liu, Wiesemann, "Differential Privacy via Distributionally Robust
// Optimization", arXiv:2304.12681) for the l1 loss (E|noise|) and the l2 loss
// (E[noise^2]). It prints a Markdown table of both figures.
//
// The optimised figures are those of the quantised weights that pass exact
// verification (optnoise.Verify), at the grid optnoise.Default chooses, as
// dp_optnoise uses them (its grid stretches the law by at most 2^-20 more).
//
// With -figures DIR it also reproduces the appendix of Selvi, Liu and Wiesemann, "Differential
// Privacy via Distributionally Robust Optimization" (its online appendices):
//
//   - the counterexample to monotone noise (epsilon 3, delta 0.3, beta
//     0.02, l1: the paper reports 0.1705 for the optimum), next to the
//     optimum under the constraint of monotonicity;
//   - its Figure 1 (sensitivity 1, beta 0.05, epsilon 1, delta 0.2; the loss
//     |x| and the asymmetric |x| + 1[x > 0] |x|) and Figure 2 (sensitivity
//     10, beta 0.5, epsilon 1, delta 0.4; l1 and l2), plotted with gonum/plot
//     to DIR/optnoise_fig1.png and DIR/optnoise_fig2.png.
package main

import (
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dpsql/dpsql/accountant"
	"github.com/dpsql/dpsql/release/optnoise"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	epss := flag.String("eps", "0.1,0.5,1,2,4", "epsilons, comma separated")
	deltas := flag.String("delta", "1e-5,1e-2,0.1", "deltas, comma separated")
	figs := flag.String("figures", "", "directory for the paper's figures and counterexample (empty: skip)")
	flag.Parse()
	e, err := floats(*epss)
	if err == nil {
		var d []float64
		if d, err = floats(*deltas); err == nil {
			err = run(os.Stdout, e, d, *figs)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "noise:", err)
		os.Exit(1)
	}
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Row holds the figures of one (epsilon, delta) at sensitivity 1.
type Row struct {
	Epsilon, Delta                    float64
	LapAbs, GaussAbs, TLapAbs, OptAbs float64
	LapSq, GaussSq, TLapSq, OptSq     float64
	OptSeconds                        float64 // both optimisations
	OptIntervals, OptPerUnit          int
}

// Compare computes one row.
func Compare(eps, delta float64) (Row, error) {
	r := Row{Epsilon: eps, Delta: delta}
	b := 1 / eps
	r.LapAbs, r.LapSq = b, 2*b*b
	mu, err := accountant.Mu(eps, delta)
	if err != nil {
		return r, err
	}
	s := 1 / mu
	r.GaussAbs, r.GaussSq = s*math.Sqrt(2/math.Pi), s*s
	a := optnoise.TLapSupport(eps, delta) * eps // support in units of b
	den := -math.Expm1(-a)
	r.TLapAbs = b * (1 - (1+a)*math.Exp(-a)) / den
	r.TLapSq = 2 * b * b * (1 - (1+a+a*a/2)*math.Exp(-a)) / den
	start := time.Now()
	for _, loss := range []optnoise.Loss{optnoise.L1, optnoise.L2} {
		p, err := optnoise.Default(eps, delta, loss)
		if err != nil {
			return r, err
		}
		d, err := optnoise.Optimise(p)
		if err != nil {
			return r, fmt.Errorf("(%v, %v, %s): %w", eps, delta, loss, err)
		}
		if loss == optnoise.L1 {
			r.OptAbs = d.Value
		} else {
			r.OptSq = d.Value
		}
		r.OptIntervals, r.OptPerUnit = p.N(), p.PerUnit
	}
	r.OptSeconds = time.Since(start).Seconds()
	return r, nil
}

func run(w io.Writer, epss, deltas []float64, figs string) error {
	fmt.Fprintln(w, "| epsilon | delta | E\\|noise\\|: Laplace | Gaussian | trunc. Laplace | optimised | E[noise^2]: Laplace | Gaussian | trunc. Laplace | optimised | optimise (s) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, e := range epss {
		for _, d := range deltas {
			r, err := Compare(e, d)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "| %g | %g | %.4g | %.4g | %.4g | **%.4g** | %.4g | %.4g | %.4g | **%.4g** | %.2f |\n",
				e, d, r.LapAbs, r.GaussAbs, r.TLapAbs, r.OptAbs, r.LapSq, r.GaussSq, r.TLapSq, r.OptSq, r.OptSeconds)
		}
	}
	if figs == "" {
		return nil
	}
	free, mono, err := Counterexample()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nCounterexample (epsilon 3, delta 0.3, beta 0.02, l1): optimum %.4f (paper: 0.1705), monotone optimum %.4f\n", free, mono)
	if err := os.MkdirAll(figs, 0o755); err != nil {
		return err
	}
	for _, f := range figures() {
		path := filepath.Join(figs, f.file)
		if err := f.draw(path); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	return nil
}

// Counterexample solves the paper's monotonicity counterexample: the free
// optimum (verified) and the optimum over monotone laws (LP value).
func Counterexample() (free, mono float64, err error) {
	p := optnoise.Problem{Epsilon: 3, Delta: 0.3, PerUnit: 50, Half: 60, Loss: optnoise.L1}
	d, err := optnoise.Optimise(p)
	if err != nil {
		return 0, 0, err
	}
	p.Monotone = true
	m, err := optnoise.Solve(p)
	if err != nil {
		return 0, 0, err
	}
	return d.Value, m.Value, nil
}

type figure struct {
	file, title string
	sens        float64 // sensitivity: x is plotted in its units
	problems    []optnoise.Problem
	names       []string
}

func asymmetric(lo, hi float64) float64 {
	if lo >= 0 {
		return lo + hi // E[2x]
	}
	return -(lo + hi) / 2
}

func figures() []figure {
	// Figure 1: sensitivity 1, beta 0.05 (D = 20), epsilon 1, delta 0.2.
	h1 := int(math.Ceil(optnoise.TLapSupport(1, 0.2) * 20))
	p1 := optnoise.Problem{Epsilon: 1, Delta: 0.2, PerUnit: 20, Half: h1, Loss: optnoise.L1}
	p1a := p1
	p1a.Cost = asymmetric
	// Figure 2: sensitivity 10, beta 0.5 (D = 20), epsilon 1, delta 0.4.
	h2 := int(math.Ceil(optnoise.TLapSupport(1, 0.4) * 20))
	p2 := optnoise.Problem{Epsilon: 1, Delta: 0.4, PerUnit: 20, Half: h2, Loss: optnoise.L1}
	p2b := p2
	p2b.Loss = optnoise.L2
	return []figure{
		{"optnoise_fig1.png", "sensitivity 1, beta 0.05, epsilon 1, delta 0.2", 1, []optnoise.Problem{p1, p1a}, []string{"|x|", "|x| + 1[x>0]|x|"}},
		{"optnoise_fig2.png", "sensitivity 10, beta 0.5, epsilon 1, delta 0.4", 10, []optnoise.Problem{p2, p2b}, []string{"l1: |x|", "l2: x^2"}},
	}
}

func (f figure) draw(path string) error {
	p := plot.New()
	p.Title.Text = "Optimised noise densities: " + f.title
	p.X.Label.Text = "noise"
	p.Y.Label.Text = "density"
	cols := []color.Color{color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}}
	for i, pr := range f.problems {
		d, err := optnoise.Optimise(pr)
		if err != nil {
			return fmt.Errorf("%s: %w", f.file, err)
		}
		q := optnoise.Probabilities(d.Weights)
		beta := f.sens / float64(pr.PerUnit)
		var pts plotter.XYs
		for j, v := range q {
			lo, hi := pr.Edges(j)
			pts = append(pts, plotter.XY{X: lo * f.sens, Y: v / beta}, plotter.XY{X: hi * f.sens, Y: v / beta})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = cols[i%2]
		l.Width = vg.Points(1.5)
		if i == 1 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (E loss %.4g)", f.names[i], d.Value*lossScale(pr, f.sens)), l)
	}
	p.Legend.Top = true
	img := vgimg.New(vg.Points(720), vg.Points(400))
	p.Draw(draw.New(img))
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// lossScale converts a loss at sensitivity 1 to sensitivity s.
func lossScale(p optnoise.Problem, s float64) float64 {
	if p.Cost == nil && p.Loss == optnoise.L2 {
		return s * s
	}
	return s
}
