package serve_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dpsql/dpsql/serve"
)

// BenchmarkDPCountHTTP: a DP COUNT over 10^5 rows (one per person) through
// POST /v1/query, 16 clients at once on a loopback listener (16 accounts over
// 4 scopes). It reports requests per second and the latency percentiles of
// one request, charge included.
//
//	go test ./serve -run '^$' -bench DPCountHTTP -benchtime 320x
func BenchmarkDPCountHTTP(b *testing.B) {
	const clients = 16
	c := newClinic(b, 100000, map[string]float64{"s0": 1e6, "s1": 1e6, "s2": 1e6, "s3": 1e6})
	var cls []*serve.Client
	_, hs := c.start(b, serve.Config{})
	for i := range clients {
		cls = append(cls, client(hs, c.account(b, fmt.Sprintf("a%d", i), fmt.Sprintf("s%d", i%4))))
	}
	// mu = 0.1 a request: 80 requests a scope compose to mu of about 0.9,
	// within what a scope can certify (its samplers' noise_tv caps epsilon
	// near 75 at delta 1e-5, which mu = 1 a request would pass).
	q := fmt.Sprintf(dpCount, 0.1)
	if _, err := cls[0].Query(context.Background(), q); err != nil { // warm the connections
		b.Fatal(err)
	}
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, cl := range cls {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				t0 := time.Now()
				if _, err := cl.Query(context.Background(), q); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
