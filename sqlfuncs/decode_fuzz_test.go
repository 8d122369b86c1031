package sqlfuncs

import (
	"strings"
	"testing"
)

// FuzzDecodeOptions: any options text either decodes into dp_avgmix's options
// or gives an error that names the function; never a panic.
func FuzzDecodeOptions(f *testing.F) {
	f.Add(`{"into":"r","mu":1,"T":10,"sampling":"hierarchical","p":0.5}`)
	f.Add(`{"into":"r","colour":1}`)
	f.Add(`{"n":60000,"into":"r","mu":1}`)
	f.Add(`{"features":"f","label":"y","into":"s","m":2}`)
	f.Add(`{"mu":"lots"}`)
	f.Add(`[1,2]`)
	f.Add(`{"m":20.0,"T":5e1,"classes":2.5}`)
	f.Add(`{"m":-0.0,"T":1e400,"M":3}`)
	f.Fuzz(func(t *testing.T, s string) {
		var o avgmixOptions
		var so selectTopmOptions
		if err := decodeOptions("dp_select_topm", []byte(s), &so); err != nil && !strings.HasPrefix(err.Error(), "dp_select_topm: ") {
			t.Fatalf("error %q does not name the function", err)
		}
		if err := decodeOptions("dp_avgmix", []byte(s), &o); err != nil && !strings.HasPrefix(err.Error(), "dp_avgmix: ") {
			t.Fatalf("error %q does not name the function", err)
		}
	})
}

// FuzzParseMechanisms: a planned mechanism either parses into valid
// descriptions or is refused; accepted ones always validate.
func FuzzParseMechanisms(f *testing.F) {
	f.Add(`{"mechanism":"subsampled_gaussian","q":0.01,"sigma":0.7,"steps":120}`)
	f.Add(`[{"mechanism":"gaussian","mu":1},{"mechanism":"laplace","epsilon":1}]`)
	f.Add(`{"mechanism":"gaussian","mu":-1}`)
	f.Add(`[]`)
	f.Add(`{"mechanism":"composite","parts":[{"mechanism":"gaussian","mu":0.05},{"mechanism":"subsampled_gaussian","q":0.01,"sigma":0.7,"steps":3}]}`)
	f.Add(`{"mechanism":"composite","parts":[{"mechanism":"composite","parts":[]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseMechanisms("dp_cost", s)
		if err != nil {
			return
		}
		if len(ms) == 0 {
			t.Fatal("accepted an empty list")
		}
		for _, m := range ms {
			if verr := m.Validate(); verr != nil {
				t.Fatalf("accepted an invalid mechanism %+v: %v", m, verr)
			}
		}
	})
}

// FuzzVecSelectIndices: indices are accepted only as non-empty lists of
// non-negative integers.
func FuzzVecSelectIndices(f *testing.F) {
	f.Add(`[3, 17, 42]`)
	f.Add(`{"indices":[0,1]}`)
	f.Add(`[-1]`)
	f.Add(`[1.5]`)
	f.Add(`[1e30]`)
	f.Fuzz(func(t *testing.T, s string) {
		var v vecSelect
		idx, err := v.indices("dp_vec_select", []byte(s))
		if err != nil {
			return
		}
		if len(idx) == 0 {
			t.Fatal("accepted empty indices")
		}
		for _, j := range idx {
			if j < 0 {
				t.Fatalf("accepted a negative index %d from %q", j, s)
			}
		}
	})
}
