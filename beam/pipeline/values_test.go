package pipeline

import (
	"reflect"
	"testing"

	"github.com/dpsql/dpsql/protect"
)

// TestValuesCoder: SQL values keep their types through the encoding, and
// damaged encodings are refused.
func TestValuesCoder(t *testing.T) {
	vs := []any{nil, int64(-3), 1.5, "ward", []byte{0, 1}, int64(1), 1.0, ""}
	b, err := appendValues(nil, vs)
	if err != nil {
		t.Fatal(err)
	}
	got, rest, err := readValues(b)
	if err != nil || len(rest) != 0 || !reflect.DeepEqual(got, vs) {
		t.Fatalf("%v round-trips to %v (%d bytes left), %v", vs, got, len(rest), err)
	}
	if _, err := appendValues(nil, []any{int32(1)}); err == nil {
		t.Fatal("encoded an int32")
	}
	for i := range len(b) - 1 {
		if _, rest, err := readValues(b[:i]); err == nil && len(rest) == 0 && i > 0 {
			t.Fatalf("decoded a truncated encoding of %d bytes", i)
		}
	}
}

// TestGroupCoder: a group's figures and keys round-trip; merging keeps the
// public keys.
func TestGroupCoder(t *testing.T) {
	g := groupAcc{Keys: []any{"w1", int64(2)}, HasKeys: true, F: protect.Figures{Persons: 3, Vals: []int64{5, -7}, Counts: []int64{1, 2}, Sqs: []int64{0, 9}}}
	b, err := encodeGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeGroup(b)
	if err != nil || !reflect.DeepEqual(back, g) {
		t.Fatalf("%+v round-trips to %+v, %v", g, back, err)
	}
	if _, err := decodeGroup(append(b, 0)); err == nil {
		t.Fatal("decoded trailing bytes")
	}
	pub := groupAcc{Keys: []any{"w1", 2.0}, HasKeys: true, Public: true}
	m := mergeGroups(mergeGroups(groupAcc{}, g), pub)
	if !m.Public || !reflect.DeepEqual(m.Keys, pub.Keys) || m.F.Persons != 3 || m.F.Vals[1] != -7 {
		t.Fatalf("merged %+v", m)
	}
}

// FuzzDecodeGroup: no input makes the decoders panic; what decodes
// re-encodes to itself.
func FuzzDecodeGroup(f *testing.F) {
	b, _ := encodeGroup(groupAcc{Keys: []any{"a", int64(1), nil, 2.5, []byte{1}}, HasKeys: true, F: protect.Figures{Persons: 1, Vals: []int64{1}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeGroup(b)
		if err != nil {
			return
		}
		b2, err := encodeGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := decodeGroup(b2)
		if err != nil || len(g2.Keys) != len(g.Keys) || g2.F.Persons != g.F.Persons {
			t.Fatalf("re-encoding changed %+v to %+v (%v)", g, g2, err)
		}
	})
}
