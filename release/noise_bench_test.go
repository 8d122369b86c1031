package release

import (
	"testing"
	"unsafe"
)

// benchSigma gives s = sigma/Grid(sigma) close to 1.5 * 2^15.
const benchSigma = 3.0

func BenchmarkAddGaussian32(b *testing.B) {
	n := NewSeededNoise(1)
	v := make([]float32, 1<<16)
	for i := range v {
		v[i] = float32(i) * 0.37
	}
	n.AddGaussian32(v, benchSigma) // build the table outside the timer
	b.SetBytes(int64(4 * len(v)))
	b.ResetTimer()
	for b.Loop() {
		n.AddGaussian32(v, benchSigma)
	}
	perElem := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(len(v))
	b.ReportMetric(perElem, "ns/sample")
	b.ReportMetric(1e3/perElem, "Msamples/s")
}

func BenchmarkAddGaussian(b *testing.B) {
	n := NewSeededNoise(1)
	v := make([]float64, 1<<16)
	for i := range v {
		v[i] = float64(i) * 0.37
	}
	n.AddGaussian(v, benchSigma)
	b.SetBytes(int64(8 * len(v)))
	b.ResetTimer()
	for b.Loop() {
		n.AddGaussian(v, benchSigma)
	}
	perElem := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(len(v))
	b.ReportMetric(perElem, "ns/sample")
	b.ReportMetric(1e3/perElem, "Msamples/s")
}

// BenchmarkTableBuild builds the largest table (s just below 2^16) from scratch.
func BenchmarkTableBuild(b *testing.B) {
	s := 0x1p16 - 1
	var t *gaussTable
	for b.Loop() {
		t = newGaussTable(s)
	}
	size := len(t.cols)*int(unsafe.Sizeof(gaussColumn{})) + 16*t.nblk // columns, then W_j and beta_j
	b.ReportMetric(float64(size)/1024, "KiB")
}

// BenchmarkAddGaussianRelease adds noise to 256 dp_avgmix outputs of the
// Fashion-MNIST shape (784 features and 10 labels each) in one call, as a
// release's worker does, on each of the two generators.
func BenchmarkAddGaussianRelease(b *testing.B) {
	for _, gen := range generators {
		b.Run(gen.name, func(b *testing.B) {
			if gen.aes && !hardwareAES() {
				b.Skip("no AES instructions: Noise uses ChaCha8 only")
			}
			setGenerator(b, gen.aes)
			n := NewSeededNoise(1)
			v := make([]float64, 794*256)
			n.AddGaussian(v, benchSigma)
			b.SetBytes(int64(8 * len(v)))
			b.ResetTimer()
			for b.Loop() {
				n.AddGaussian(v, benchSigma)
			}
			perElem := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(len(v))
			b.ReportMetric(perElem, "ns/sample")
			b.ReportMetric(1e3/perElem, "Msamples/s")
		})
	}
}
