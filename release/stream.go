package release

import (
	"crypto/aes"
	"crypto/cipher"
	"math/bits"
	mrand "math/rand/v2"
	"runtime"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The Noise's word stream: AES-256-CTR where the CPU has AES instructions,
// else ChaCha8. See [Noise] ("Generator") for what it is and why.

const (
	// streamBytes is the keystream produced per refill: 256 AES blocks.
	streamBytes = 4096
	streamWords = streamBytes / 8
	// aesRekeyBlocks is the most AES blocks a stream draws under one key
	// before it rekeys from its own keystream (2 more blocks make the key).
	aesRekeyBlocks = 1 << 32
)

// zeros is the plaintext the keystream is XORed into.
var zeros [streamBytes]byte

// useAES says whether new Noises use the AES-256-CTR stream. Tests set it to
// false to exercise the ChaCha8 fallback on machines that have AES.
var useAES = hardwareAES()

// hardwareAES reports whether crypto/aes uses AES instructions here, so that
// AES-CTR is constant-time. It mirrors the conditions of Go's
// crypto/internal/fips140/aes (AES-NI with SSE4.1 and SSSE3 on amd64, the
// AES extension on arm64, CPACF with AES and CBC on s390x); golang.org/x/sys/cpu
// reads the same GODEBUG=cpu.aes=off override as the runtime. ppc64 is left on
// ChaCha8: its AES assembly can be switched off by a GODEBUG setting this
// package cannot see.
func hardwareAES() bool {
	if pureGo {
		return false
	}
	switch runtime.GOARCH {
	case "amd64":
		return cpu.X86.HasAES && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3
	case "arm64":
		return cpu.ARM64.HasAES
	case "s390x":
		return cpu.S390X.HasAES && cpu.S390X.HasAESCBC
	}
	return false
}

// stream is a buffered source of uniform 64-bit words: AES-256-CTR
// keystream, or ChaCha8 where AES is not in hardware. It implements
// math/rand/v2's Source. Not safe for concurrent use.
type stream struct {
	pos    uint           // words of buf already read, at most streamWords
	ctr    cipher.Stream  // AES-256-CTR under the current key; nil for ChaCha8
	blocks uint64         // AES blocks produced under the current key
	cha    *mrand.ChaCha8 // the fallback generator
	buf    [streamWords]uint64
}

// newStream returns the stream of a Noise seeded with seed: AES-256-CTR
// with key seed and counter 0 if useAES, else ChaCha8 seeded with seed.
func newStream(seed [32]byte) *stream {
	if useAES {
		return newAESStream(&seed, &[aes.BlockSize]byte{})
	}
	return &stream{pos: streamWords, cha: mrand.NewChaCha8(seed)}
}

// newAESStream returns the AES-256-CTR stream with the given key and first
// counter block (zero for every Noise; tests use others).
func newAESStream(key *[32]byte, iv *[aes.BlockSize]byte) *stream {
	s := &stream{pos: streamWords}
	s.setKey(key, iv)
	return s
}

func (s *stream) setKey(key *[32]byte, iv *[aes.BlockSize]byte) {
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic("release: AES-256 key rejected: " + err.Error()) // cannot happen: the key has 32 bytes
	}
	s.ctr = cipher.NewCTR(b, iv[:])
	s.blocks = 0
}

// refill replaces the buffer with the next streamBytes of the stream.
func (s *stream) refill() {
	if s.ctr != nil {
		if s.blocks >= aesRekeyBlocks {
			var k [32]byte
			s.ctr.XORKeyStream(k[:], zeros[:32])
			s.setKey(&k, &[aes.BlockSize]byte{})
		}
		// The keystream is written over the words' memory; word i then holds
		// bytes 8i..8i+7 in the machine's byte order, made little endian below.
		b := unsafe.Slice((*byte)(unsafe.Pointer(&s.buf)), streamBytes)
		s.ctr.XORKeyStream(b, zeros[:])
		s.blocks += streamBytes / aes.BlockSize
		if cpu.IsBigEndian {
			for i, w := range s.buf {
				s.buf[i] = bits.ReverseBytes64(w)
			}
		}
	} else {
		for i := range s.buf {
			s.buf[i] = s.cha.Uint64()
		}
	}
	s.pos = 0
}

// Uint64 returns the next word.
func (s *stream) Uint64() uint64 {
	if p := s.pos; p < streamWords {
		s.pos = p + 1
		return s.buf[p]
	}
	return s.uint64Slow()
}

// uint64Slow is Uint64 across a refill.
func (s *stream) uint64Slow() uint64 {
	s.refill()
	s.pos = 1
	return s.buf[0]
}

// next2 returns the next two words, in order.
func (s *stream) next2() (uint64, uint64) {
	p := s.pos
	if p > streamWords-2 {
		return s.next2Slow()
	}
	s.pos = p + 2
	return s.buf[p], s.buf[p+1]
}

// next2Slow is next2 across a refill (or with one word left).
func (s *stream) next2Slow() (uint64, uint64) {
	a := s.Uint64()
	return a, s.Uint64()
}
