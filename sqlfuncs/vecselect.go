package sqlfuncs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"github.com/dpsql/dpsql/release/dfs"
	"github.com/dpsql/dpsql/vector"
)

// vecSelect implements dp_vec_select(x, indices), a plain projection of raw
// data, NOT a private release: it returns the coordinates indices of the
// float32 vector x, in that order, as a float32 BLOB, with no noise and no
// charge. Whatever x holds comes out as it is: applied to protected rows it
// shows them in clear, exactly like selecting the column. It is meant for
// applying a released selection to rows that are not protected (a public test
// set), where choosing the indices from the release is post-processing.
// indices is a JSON array of 0-based feature indices, or a JSON object with
// an "indices" array (dp_select_topm's summary, or the params of its
// dp_ledger row). It keeps the last parsed indices, since a query passes the
// same ones on every row.
type vecSelect struct {
	mu   sync.Mutex
	last []byte
	idx  []int
}

func (v *vecSelect) call(a *args) (any, error) {
	const fn = "dp_vec_select"
	x := a.raw("x").([]float32)
	var raw []byte
	switch t := a.raw("indices_json").(type) {
	case string:
		raw = []byte(t)
	case []byte:
		raw = t
	}
	if raw == nil {
		return nil, argError(fn, "indices", "must be a JSON array of feature indices (TEXT), got %s", typeName(a.raw("indices_json")))
	}
	idx, err := v.indices(fn, raw)
	if err != nil {
		return nil, err
	}
	for i, j := range idx {
		if j >= len(x) {
			return nil, fmt.Errorf("%s: index %d (entry %d of indices) is outside the %d dimensions of x (0..%d)", fn, j, i, len(x), len(x)-1)
		}
	}
	out, err := dfs.Apply(x, idx)
	if err != nil {
		return nil, err
	}
	return vector.Encode(out), nil
}

// indices parses (or recalls) a JSON array of non-negative integers, or an
// object holding one under "indices".
func (v *vecSelect) indices(fn string, raw []byte) ([]int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx != nil && bytes.Equal(raw, v.last) {
		return v.idx, nil
	}
	var any0 any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&any0); err != nil {
		return nil, fmt.Errorf("%s: indices are not JSON: %v", fn, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: indices: unexpected text after the JSON value", fn)
	}
	if obj, ok := any0.(map[string]any); ok {
		inner, ok := obj["indices"]
		if !ok {
			return nil, fmt.Errorf("%s: indices: a JSON object must hold an \"indices\" array (dp_select_topm's summary or ledger params)", fn)
		}
		any0 = inner
	}
	arr, ok := any0.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: indices must be a JSON array of feature indices, e.g. [3, 17, 42]", fn)
	}
	if len(arr) == 0 {
		return nil, fmt.Errorf("%s: indices are empty: select at least one feature", fn)
	}
	idx := make([]int, len(arr))
	for i, e := range arr {
		num, ok := e.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: entry %d of indices is %v, not an integer", fn, i, e)
		}
		j, err := num.Int64()
		if err != nil {
			f, ferr := num.Float64()
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				return nil, fmt.Errorf("%s: entry %d of indices is %s, not an integer", fn, i, num)
			}
			j = int64(f)
		}
		if j < 0 || j > math.MaxInt32 {
			return nil, fmt.Errorf("%s: entry %d of indices is %d; indices count features from 0", fn, i, j)
		}
		idx[i] = int(j)
	}
	v.last = append(v.last[:0], raw...)
	v.idx = idx
	return idx, nil
}
