package avgmix_test

import (
	"fmt"

	"github.com/dpsql/dpsql/release"
	"github.com/dpsql/dpsql/release/avgmix"
)

// Release 4 mixed rows from a table of 8 two-dimensional points with one-hot
// labels of 2 classes, averaging about m = 4 rows each, under 1-GDP.
func Example() {
	data := avgmix.Data{
		X: []float32{
			0.9, 0.1, 0.8, 0.2, 1.0, 0.0, 0.7, 0.3, // class 0
			0.1, 0.9, 0.2, 0.8, 0.0, 1.0, 0.3, 0.7, // class 1
		},
		D: 2,
		Y: []float32{1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1},
		K: 2,
		N: 8,
	}
	plan, err := avgmix.NewPlan(nil, data.N, data.D, data.K, avgmix.Params{T: 4, M: 4, Mu: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Charge plan.Mechanism to the budget here, then release.
	fmt.Printf("charge %s: q = %.2f, steps = %d, sigma = %.4f (CLT mu = %.4f)\n",
		plan.Mechanism.Kind, plan.Mechanism.Q, plan.Mechanism.Steps, plan.Mechanism.Sigma, plan.CLTMu)
	fmt.Printf("noise sd per coordinate: features %.4f, labels %.4f\n",
		plan.Cx*plan.SigmaX/float64(plan.M), plan.Cy*plan.SigmaY/float64(plan.M))

	// x and y are reused after the callback returns: copy them to keep them.
	err = avgmix.Release(release.NewNoise(), data, plan, func(i int, x, y []float32) error {
		fmt.Printf("row %d: %d features, %d labels\n", i, len(x), len(y))
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// charge subsampled_gaussian: q = 0.50, steps = 4, sigma = 1.2011 (CLT mu = 1.0000)
	// noise sd per coordinate: features 0.4247, labels 0.4247
	// row 0: 2 features, 2 labels
	// row 1: 2 features, 2 labels
	// row 2: 2 features, 2 labels
	// row 3: 2 features, 2 labels
}
