// Command dfs reproduces the synthetic experiment of "Larger Model Causes
// Lower Classification Accuracy Under Differential Privacy: Reason and
// Solution" (the ICLR 2022 submission of Shen, Wang, Sun, Shen, "Towards
// Understanding the Impact of Model Size on Differential Private
// Classification", arXiv:2111.13895), Section 4.1 (Figures 3 and 4 of
// arXiv:2111.13895) with dpsql's sound DFS: private selection
// from noisy class statistics, rows clipped to public bounds, noise
// calibrated in Gaussian DP, replace-one per-row release.
//
// Two Gaussian classes in p = 3000 dimensions, Sigma_k = diag(a_1k..a_pk)
// with a_jk ~ exp(0.1), mu_0 = 0, mu_1 coordinate-wise
// (1-c) delta_0 + c Laplace(0, 1/2) with c = 0.88; 30 training and 200 test
// points per class; the Fisher (LDA) classifier of arXiv:2111.13895, Definition 4,
// trained on the released rows and applied to the test rows restricted to
// the selected features (and clipped like the training rows).
//
// "exp(0.1)" is read as the exponential distribution with rate 0.1 (mean 10):
// with it the noise-free classifier on the first m features needs about 1000
// features to reach zero error, as the paper reports; with mean 0.1
// (-varmean 0.1) it needs about 20.
//
// It compares, at the same total privacy budget:
//
//   - DFS: private selection by the distance score, then private release;
//   - t-statistic: private selection by the t score, then private release;
//   - no selection: the first m features (the features are exchangeable, so
//     this is a random subset), the whole budget on the release;
//   - DFS with exact means, as in the paper: NOT differentially private (the
//     selection leaks), shown only to measure what private selection costs;
//   - the noise-free references of Figure 3.
//
// Budgets are quoted as the total replace-one GDP mu of the pipeline and the
// epsilon it gives at -delta. Each training size in -ntrain is one scenario:
// the paper's 30 per class, and a larger one where private selection has
// enough signal. The noise is seeded (-seed, in builds with -tags
// dpsql_testseed) so the tables are reproducible;
// this is an experiment on synthetic data, not a release.
//
// Usage:
//
//	go run ./examples/dfs -reps 50 -png docs/dfs.png
package main

import (
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/dpsql/dpsql/accountant"
)

func main() {
	var c config
	flag.IntVar(&c.P, "p", 3000, "number of features")
	ntrainFlag := flag.String("ntrain", "30,1000", "training points per class, one scenario each")
	flag.IntVar(&c.NTest, "ntest", 200, "test points per class")
	flag.IntVar(&c.Reps, "reps", 50, "repetitions (fresh model and data each)")
	flag.Float64Var(&c.VarMean, "varmean", 10, "mean of the exponential variances a_jk (exp(0.1) read as rate 0.1)")
	flag.Float64Var(&c.C, "c", 0.88, "probability that a coordinate of mu_1 is nonzero")
	flag.Float64Var(&c.Delta, "delta", 1e-4, "delta at which budgets are quoted as epsilon")
	flag.Float64Var(&c.SelShare, "selshare", 0.5, "share of mu_total^2 spent on the private selection")
	flag.Float64Var(&c.CSelect, "cselect", 0, "clip bound of whole rows for the selection (0: sqrt(p * varmean))")
	flag.Float64Var(&c.CReleasePerFeature, "crelease", 0, "clip bound of the m released features, per sqrt(m) (0: sqrt(varmean))")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the data and of the (test-hook) noise")
	msFlag := flag.String("ms", "1,2,5,10,20,30,50,70,100,200,500,1000,3000", "feature counts for the error-vs-m sweep")
	epsMFlag := flag.String("eps-m", "4,5,10", "epsilons of the error-vs-m sweep (Fig. 3: 5, 10; Fig. 4a: 4)")
	epsFlag := flag.String("eps", "1,2,3,4,5,6,7,8,9,10", "epsilons of the error-vs-budget sweep (Fig. 4b)")
	mEps := flag.Int("m-eps", 70, "number of features of the error-vs-budget sweep (Fig. 4b: 70)")
	pngPath := flag.String("png", "", "write the plot to this PNG file")
	flag.Parse()
	if c.CSelect == 0 {
		c.CSelect = math.Sqrt(float64(c.P) * c.VarMean)
	}
	if c.CReleasePerFeature == 0 {
		c.CReleasePerFeature = math.Sqrt(c.VarMean)
	}
	ntrains, err := parseInts(*ntrainFlag)
	if err != nil {
		log.Fatal(err)
	}
	ms, err := parseInts(*msFlag)
	if err != nil {
		log.Fatal(err)
	}
	epsM, err := parseFloats(*epsMFlag)
	if err != nil {
		log.Fatal(err)
	}
	epss, err := parseFloats(*epsFlag)
	if err != nil {
		log.Fatal(err)
	}
	var scenarios []scenario
	for _, nt := range ntrains {
		sc := c
		sc.NTrain = nt
		res, err := run(os.Stdout, sc, uniqueMs(ms, c.P), epsM, epss, *mEps)
		if err != nil {
			log.Fatal(err)
		}
		scenarios = append(scenarios, scenario{sc, res})
	}
	if *pngPath != "" {
		if err := writePlot(*pngPath, scenarios, uniqueMs(ms, c.P), epsM, epss, *mEps); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("\nPlot written to %s.\n", *pngPath)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
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

// muOf returns the total replace-one GDP mu that gives (eps, delta)-DP.
func muOf(eps, delta float64) float64 {
	mu, err := accountant.Mu(eps, delta)
	if err != nil {
		log.Fatal(err)
	}
	return mu
}

// scenario is one training size and its results.
type scenario struct {
	c   config
	res results
}

// grid lists every cell of the sweeps.
func grid(c config, ms []int, epsM, epss []float64, mEps int) []cell {
	var grid []cell
	for _, m := range ms {
		for _, meth := range cleanMethods {
			grid = append(grid, cell{meth, m, 0})
		}
		for _, eps := range epsM {
			for _, meth := range privateMethods {
				grid = append(grid, cell{meth, m, muOf(eps, c.Delta)})
			}
		}
	}
	for _, eps := range epss {
		for _, meth := range privateMethods {
			grid = append(grid, cell{meth, mEps, muOf(eps, c.Delta)})
		}
		grid = append(grid, cell{methodFirst, c.P, muOf(eps, c.Delta)})
	}
	seen := map[cell]bool{}
	var uniq []cell
	for _, g := range grid {
		if !seen[g] {
			seen[g] = true
			uniq = append(uniq, g)
		}
	}
	return uniq
}

// run computes one scenario and prints its tables.
func run(w io.Writer, c config, ms []int, epsM, epss []float64, mEps int) (results, error) {
	res, err := c.sweep(grid(c, ms, epsM, epss, mEps))
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(w, "# DFS reproduction, %d training points per class: the ICLR 2022 version of arXiv:2111.13895, Section 4.1 (synthetic data)\n\n", c.NTrain)
	fmt.Fprintf(w, "p = %d, %d training and %d test points per class, a_jk ~ Exponential(mean %g), c = %g, %d repetitions.\n",
		c.P, c.NTrain, c.NTest, c.VarMean, c.C, c.Reps)
	fmt.Fprintf(w, "Clip bounds: selection C = %.4g (whole rows), release C = %.4g sqrt(m). Private selection spends %.0f%% of mu^2 as (2 MuSelect)^2.\n",
		c.CSelect, c.CReleasePerFeature, 100*c.SelShare)
	fmt.Fprintf(w, "Budgets: total replace-one GDP mu, quoted as (epsilon, %g)-DP. Entries: mean test error ± standard error.\n\n", c.Delta)

	fmt.Fprintf(w, "## Test error vs number of features, no noise (Fig. 3, noiseless)\n\n")
	fmt.Fprintf(w, "| m | %s | %s |\n|---:|---:|---:|\n", methodClean, methodCleanAll)
	for _, m := range ms {
		fmt.Fprintf(w, "| %d | %s | %s |\n", m, fmtCell(res, cell{methodClean, m, 0}), fmtCell(res, cell{methodCleanAll, m, 0}))
	}
	for _, eps := range epsM {
		mu := muOf(eps, c.Delta)
		fmt.Fprintf(w, "\n## Test error vs number of features at epsilon = %g (mu = %.3f) (Fig. 3 / 4a)\n\n", eps, mu)
		fmt.Fprintf(w, "| m |")
		for _, meth := range privateMethods {
			fmt.Fprintf(w, " %s |", meth)
		}
		fmt.Fprintf(w, "\n|---:|%s\n", strings.Repeat("---:|", len(privateMethods)))
		for _, m := range ms {
			fmt.Fprintf(w, "| %d |", m)
			for _, meth := range privateMethods {
				fmt.Fprintf(w, " %s |", fmtCell(res, cell{meth, m, mu}))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\n## Test error vs budget, m = %d (Fig. 4b)\n\n", mEps)
	fmt.Fprintf(w, "| epsilon | mu |")
	for _, meth := range privateMethods {
		fmt.Fprintf(w, " %s |", meth)
	}
	fmt.Fprintf(w, " all %d features |\n|---:|---:|%s---:|\n", c.P, strings.Repeat("---:|", len(privateMethods)))
	for _, eps := range epss {
		mu := muOf(eps, c.Delta)
		fmt.Fprintf(w, "| %g | %.3f |", eps, mu)
		for _, meth := range privateMethods {
			fmt.Fprintf(w, " %s |", fmtCell(res, cell{meth, mEps, mu}))
		}
		fmt.Fprintf(w, " %s |\n", fmtCell(res, cell{methodFirst, c.P, mu}))
	}
	fmt.Fprintln(w)
	return res, nil
}

func fmtCell(res results, c cell) string {
	if len(res[c]) == 0 {
		return "–"
	}
	m, se := res.mean(c)
	return fmt.Sprintf("%.3f ± %.3f", m, se)
}

var colours = map[string]color.Color{
	methodDFS:      color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	methodT:        color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	methodFirst:    color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	methodExactDFS: color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	methodClean:    color.RGBA{A: 0xff},
}

func addLine(p *plot.Plot, name string, col color.Color, pts plotter.XYs, dashed bool) error {
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, s.Color = col, col
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// panels draws the two panels of one scenario: (a) error vs m at the first
// epsilon of epsM, (b) error vs epsilon at mEps features.
func panels(sc scenario, ms []int, epsM, epss []float64, mEps int) (*plot.Plot, *plot.Plot, error) {
	c, res := sc.c, sc.res
	a := plot.New()
	eps := epsM[0]
	mu := muOf(eps, c.Delta)
	a.Title.Text = fmt.Sprintf("(a) %d train/class: test error vs m, epsilon = %g (mu = %.2f)", c.NTrain, eps, mu)
	a.X.Label.Text = "number of selected features m"
	a.Y.Label.Text = "test error"
	a.X.Scale = plot.LogScale{}
	a.X.Tick.Marker = plot.LogTicks{Prec: -1}
	a.Y.Min, a.Y.Max = 0, 0.85
	for _, meth := range append(append([]string{}, privateMethods...), methodClean) {
		var pts plotter.XYs
		for _, m := range ms {
			cl := cell{meth, m, mu}
			if meth == methodClean {
				cl.mu = 0
			}
			if len(res[cl]) > 0 {
				v, _ := res.mean(cl)
				pts = append(pts, plotter.XY{X: float64(m), Y: v})
			}
		}
		if err := addLine(a, meth, colours[meth], pts, meth == methodExactDFS || meth == methodClean); err != nil {
			return nil, nil, err
		}
	}
	a.Legend.Top = true
	a.Legend.Left = true

	b := plot.New()
	b.Title.Text = fmt.Sprintf("(b) %d train/class: test error vs epsilon (delta = %g), m = %d", c.NTrain, c.Delta, mEps)
	b.X.Label.Text = "epsilon"
	b.Y.Label.Text = "test error"
	b.Y.Min, b.Y.Max = 0, 0.85
	for _, meth := range privateMethods {
		var pts plotter.XYs
		for _, e := range epss {
			v, _ := res.mean(cell{meth, mEps, muOf(e, c.Delta)})
			pts = append(pts, plotter.XY{X: e, Y: v})
		}
		if err := addLine(b, meth, colours[meth], pts, meth == methodExactDFS); err != nil {
			return nil, nil, err
		}
	}
	var all plotter.XYs
	for _, e := range epss {
		v, _ := res.mean(cell{methodFirst, c.P, muOf(e, c.Delta)})
		all = append(all, plotter.XY{X: e, Y: v})
	}
	purple := color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	if err := addLine(b, fmt.Sprintf("no selection (all %d)", c.P), purple, all, false); err != nil {
		return nil, nil, err
	}
	b.Legend.Top = true
	return a, b, nil
}

// writePlot draws one row of two panels per scenario into a PNG.
func writePlot(path string, scs []scenario, ms []int, epsM, epss []float64, mEps int) error {
	var rows [][]*plot.Plot
	for _, sc := range scs {
		a, b, err := panels(sc, ms, epsM, epss, mEps)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{a, b})
	}
	img := vgimg.New(vg.Points(1100), vg.Points(float64(430*len(rows))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: vg.Points(24), PadY: vg.Points(24),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	cv := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(cv[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
