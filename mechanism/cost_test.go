package mechanism

import (
	"math"
	"strings"
	"testing"
)

func TestCostOf(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		mu     float64
		params string
		want   string
	}{
		{0.5, `{"mechanism":"gaussian","sensitivity":1,"sigma":2,"dim":1}`, "mu 0.5"},
		{0.3, `{"mechanism":"gaussian","mu":0.3,"epsilon_requested":1,"delta_requested":1e-6}`, "epsilon 1, delta 1e-06; Gaussian noise, mu 0.3"},
		{inf, `{"mechanism":"laplace","sensitivity":1,"epsilon":0.25,"grid":1e-9}`, "epsilon 0.25, delta 0"},
		{inf, `{"mechanism":"laplace","sensitivity":1,"epsilon":0.25,"steps":4}`, "epsilon 1, delta 0"},
		{inf, `{"mechanism":"composite","parts":[{"mechanism":"laplace_inf","epsilon":0.5,"delta":1e-7,"sensitivity":1},` +
			`{"mechanism":"laplace","epsilon":0.25,"sensitivity":1}],"epsilon_requested":0.8,"delta_requested":2e-7}`, "epsilon 0.8, delta 2e-07"},
		{inf, `{"mechanism":"composite","parts":[{"mechanism":"laplace_inf","epsilon":0.5,"delta":1e-7,"sensitivity":1},` +
			`{"mechanism":"laplace","epsilon":0.25,"sensitivity":1}]}`, "epsilon 0.75, delta 1e-07"},
		{inf, `{"mechanism":"composite","parts":[{"mechanism":"laplace","epsilon":0.5,"sensitivity":1},{"mechanism":"gaussian","mu":1}]}`, "no finite mu"},
		{inf, `not json`, "no finite mu"},
	} {
		got := CostOf(c.mu, c.params).String()
		if got != c.want {
			t.Errorf("CostOf(%v, %s) = %q, want %q", c.mu, c.params, got, c.want)
		}
		if strings.Contains(got, "Inf") {
			t.Errorf("CostOf(%v, %s) prints an infinity: %q", c.mu, c.params, got)
		}
	}
}
