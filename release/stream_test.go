package release

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// generators are the two streams a Noise can run on.
var generators = []struct {
	name string
	aes  bool
}{{"aes256ctr", true}, {"chacha8", false}}

// forGenerators runs f once per generator, with new Noises using it. The AES
// run is skipped only where the CPU has no AES instructions, since Noise
// never uses AES there.
func forGenerators(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			if g.aes && !hardwareAES() {
				withoutAES(t, "Noise uses ChaCha8 only")
			}
			setGenerator(t, g.aes)
			f(t)
		})
	}
}

// withoutAES ends a test of the AES stream on a CPU without AES
// instructions: it fails under CI (CI=true), whose machines have them, so
// that the stream Noise uses there is never left untested, and skips
// elsewhere, where Noise never uses AES.
func withoutAES(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("no AES instructions on %s under CI=true: the AES stream would go untested (%s)", runtime.GOARCH, why)
	}
	t.Skipf("no AES instructions on %s (outside CI): %s", runtime.GOARCH, why)
}

// setGenerator makes new Noises use AES (or ChaCha8) until t ends.
func setGenerator(t testing.TB, useAESStream bool) {
	old := useAES
	useAES = useAESStream
	t.Cleanup(func() { useAES = old })
}

// readWords reads count words from s (no more) in an irregular pattern of
// single reads and pairs, so that pairs straddle refills at odd positions too.
func readWords(s *stream, count int) []uint64 {
	out := make([]uint64, 0, count+1)
	for i := 0; len(out) < count; i++ {
		switch {
		case i%7 == 0 || i%7 == 3 || len(out) == count-1:
			out = append(out, s.Uint64())
		default:
			a, b := s.next2()
			out = append(out, a, b)
		}
	}
	return out
}

// ctrWords returns the first count words of AES-256-CTR with key and first
// counter block iv, computed by crypto/cipher in one call.
func ctrWords(t *testing.T, key, iv []byte, count int) []uint64 {
	t.Helper()
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	ks := make([]byte, 8*count)
	cipher.NewCTR(b, iv).XORKeyStream(ks, ks)
	w := make([]uint64, count)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(ks[8*i:])
	}
	return w
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamAESKnownAnswer checks the AES stream against NIST SP 800-38A,
// F.5.5 (CTR-AES256.Encrypt): its four output blocks (plaintext XOR
// ciphertext) must be keystream blocks 0-3 from the given initial counter,
// and blocks 254-257 from a counter 254 lower, which puts the vector across
// the first refill (the counter's low bytes carry, too). The vector's bytes
// are read back from the words in little-endian order.
func TestStreamAESKnownAnswer(t *testing.T) {
	key := unhex(t, "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
	ctr0 := unhex(t, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
	pt := unhex(t, "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"+
		"30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
	ct := unhex(t, "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"+
		"2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6")
	want := make([]byte, len(pt))
	for i := range pt {
		want[i] = pt[i] ^ ct[i]
	}
	for _, first := range []int{0, 254} {
		var k [32]byte
		var iv [16]byte
		copy(k[:], key)
		copy(iv[:], ctr0)
		// iv = ctr0 - first, as a 128-bit big-endian number.
		lo := binary.BigEndian.Uint64(iv[8:])
		hi := binary.BigEndian.Uint64(iv[:8])
		if lo < uint64(first) {
			hi--
		}
		binary.BigEndian.PutUint64(iv[8:], lo-uint64(first))
		binary.BigEndian.PutUint64(iv[:8], hi)
		words := readWords(newAESStream(&k, &iv), 2*first+8)
		got := make([]byte, 0, 64)
		for _, w := range words[2*first:] {
			got = binary.LittleEndian.AppendUint64(got, w)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("blocks %d-%d:\n got %x\nwant %x", first, first+3, got, want)
		}
	}
}

// TestStreamMatchesCTR compares a Noise's AES stream (zero counter, the seed
// as key), read through refills at every alignment, with crypto/cipher's CTR
// output; and the ChaCha8 fallback with math/rand/v2's ChaCha8, word for word.
func TestStreamMatchesCTR(t *testing.T) {
	const count = 3*streamWords + 77
	seed := [32]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31: 0xee}
	t.Run("aes256ctr", func(t *testing.T) {
		setGenerator(t, true)
		n := newNoise(seed)
		if n.src.ctr == nil {
			t.Fatal("useAES set, but the Noise's stream is not AES")
		}
		want := ctrWords(t, seed[:], make([]byte, 16), count+2)
		if got := readWords(n.src, count); !slices.Equal(got, want[:count]) {
			t.Fatalf("stream differs from AES-256-CTR at word %d", firstDiff(got, want))
		}
		// Rand reads the same stream.
		if a, b := n.Rand().Uint64(), n.Rand().Uint64(); a != want[count] || b != want[count+1] {
			t.Errorf("Rand().Uint64() = %x, %x; stream words are %x, %x", a, b, want[count], want[count+1])
		}
	})
	t.Run("chacha8", func(t *testing.T) {
		setGenerator(t, false)
		n := newNoise(seed)
		if n.src.ctr != nil || n.src.cha == nil {
			t.Fatal("useAES unset, but the Noise's stream is not ChaCha8")
		}
		ref := mrand.NewChaCha8(seed)
		want := make([]uint64, count+1)
		for i := range want {
			want[i] = ref.Uint64()
		}
		if got := readWords(n.src, count); !slices.Equal(got, want[:count]) {
			t.Fatalf("stream differs from ChaCha8 at word %d", firstDiff(got, want))
		}
		if a := n.Rand().Uint64(); a != want[count] {
			t.Errorf("Rand().Uint64() = %x, stream word is %x", a, want[count])
		}
	})
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestStreamRekey: once a key has produced aesRekeyBlocks blocks, the next
// refill keys AES-256-CTR (counter 0) with the next 32 bytes of the old
// keystream.
func TestStreamRekey(t *testing.T) {
	key := [32]byte{9, 8, 7}
	s := newAESStream(&key, &[16]byte{})
	first := readWords(s, streamWords) // one refill: 256 blocks under key
	if s.blocks != streamBytes/aes.BlockSize {
		t.Fatalf("%d blocks counted after one refill, want %d", s.blocks, streamBytes/aes.BlockSize)
	}
	old := ctrWords(t, key[:], make([]byte, 16), streamWords+4)
	if !slices.Equal(first, old[:streamWords]) {
		t.Fatal("first buffer is not the CTR keystream")
	}
	s.blocks = aesRekeyBlocks // as if 2^32 blocks had been drawn
	next := readWords(s, 2*streamWords)
	var k2 [32]byte
	for i, w := range old[streamWords:] {
		binary.LittleEndian.PutUint64(k2[8*i:], w)
	}
	if want := ctrWords(t, k2[:], make([]byte, 16), 2*streamWords); !slices.Equal(next, want) {
		t.Fatalf("after the rekey the stream is not AES-256-CTR under the next 32 keystream bytes (differs at word %d)", firstDiff(next, want))
	}
	if s.blocks != 2*streamBytes/aes.BlockSize {
		t.Errorf("%d blocks counted under the new key, want %d", s.blocks, 2*streamBytes/aes.BlockSize)
	}
	// Up to the limit there is no rekey.
	s2 := newAESStream(&key, &[16]byte{})
	s2.blocks = aesRekeyBlocks - 2*streamBytes/aes.BlockSize
	long := ctrWords(t, key[:], make([]byte, 16), 2*streamWords)
	if got := readWords(s2, 2*streamWords); !slices.Equal(got, long) || s2.blocks != aesRekeyBlocks {
		t.Errorf("stream rekeyed before the limit (%d blocks counted)", s2.blocks)
	}
}

// TestNoiseSplitKeys: a Split child's key (ChaCha8: seed) is the parent's
// next 32 bytes, so the parent's stream moves on by four words, children
// get distinct keys, and none equals the parent's.
func TestNoiseSplitKeys(t *testing.T) {
	seed := [32]byte{42}
	forGenerators(t, func(t *testing.T) {
		ref := newNoise(seed).src
		w := readWords(ref, 13)
		p := newNoise(seed)
		c1, c2 := p.Split(), p.Split()
		if got := p.src.Uint64(); got != w[8] {
			t.Errorf("parent's word after two Splits = %x, want its 9th word %x", got, w[8])
		}
		for i, c := range []*Noise{c1, c2} {
			var k [32]byte
			for j := range 4 {
				binary.LittleEndian.PutUint64(k[8*j:], w[4*i+j])
			}
			want := readWords(newStream(k), 2*streamWords+3)
			if got := readWords(c.src, len(want)); !slices.Equal(got, want) {
				t.Errorf("child %d is not keyed with parent words %d-%d", i+1, 4*i, 4*i+3)
			}
			if (c.src.ctr != nil) != useAES {
				t.Errorf("child %d does not use the parent's generator", i+1)
			}
		}
		if slices.Equal(w[0:4], w[4:8]) {
			t.Error("two Splits drew the same key")
		}
		pw, x1, x2 := readWords(p.src, 64), readWords(c1.src, 64), readWords(c2.src, 64)
		if slices.Equal(x1, x2) || slices.Equal(pw, x1) || slices.Equal(pw, x2) {
			t.Error("Split streams coincide")
		}
	})
}

// TestHardwareAESGate: where the CPU has AES instructions a Noise uses the
// AES stream, and with GODEBUG=cpu.aes=off (which makes crypto/aes use its
// table-based software code) the gate closes and Noise uses ChaCha8. The
// second part runs the test binary again with that setting.
func TestHardwareAESGate(t *testing.T) {
	if os.Getenv("DPSQL_AES_GATE_CHILD") == "1" {
		if hardwareAES() || useAES || NewNoise().src.ctr != nil {
			t.Fatalf("GODEBUG=%s: hardwareAES() = %v, useAES = %v: AES stream would run on software AES", os.Getenv("GODEBUG"), hardwareAES(), useAES)
		}
		return
	}
	hw := !pureGo && runtime.GOARCH == "amd64" && cpu.X86.HasAES && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3 ||
		!pureGo && runtime.GOARCH == "arm64" && cpu.ARM64.HasAES
	if hw != hardwareAES() && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		t.Errorf("hardwareAES() = %v on %s with AES instructions %v", hardwareAES(), runtime.GOARCH, hw)
	}
	if got := NewNoise().src.ctr != nil; got != hardwareAES() {
		t.Errorf("NewNoise uses AES: %v, hardware AES: %v", got, hardwareAES())
	}
	if !hardwareAES() {
		withoutAES(t, "nothing to switch off")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardwareAESGate$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DPSQL_AES_GATE_CHILD=1", "GODEBUG=cpu.aes=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with GODEBUG=cpu.aes=off: %v\n%s", err, out)
	}
}
