package mechanism

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Records names the params record of every release that charges the
// ledger: a function returning a pointer to a zero record of its type. docs/ledger.md
// ("Params records") documents each.
var Records = map[string]func() any{
	"dp_gaussian":          func() any { return new(Gaussian) },
	"dp_vec_sum":           func() any { return new(VecSum) },
	"gdp_spend":            func() any { return new(External) },
	"dp_laplace":           func() any { return new(Laplace) },
	"dp_tlaplace":          func() any { return new(Laplace) },
	"dp_optnoise":          func() any { return new(OptNoise) },
	"dp_avgmix":            func() any { return new(Avgmix) },
	"dp_avgmix count":      func() any { return new(AvgmixCount) },
	"dp_select_topm":       func() any { return new(SelectTopm) },
	"protect":              func() any { return new(Protected) },
	"dpsql-beam avgmix":    func() any { return new(BeamAvgmix) },
	"dpsql-beam aggregate": func() any { return new(BeamAggregate) },
}

// BeamAvgmix is the record of a dp_avgmix release run by dpsql-beam: the
// same record dp_avgmix writes, and the run's.
type BeamAvgmix struct {
	Avgmix
	BeamRun
}

// Fields returns a params record as a JSON object's fields (numbers as
// float64), as the ledger row records them. A nil record has none.
func Fields(rec any) (map[string]any, error) {
	out := map[string]any{}
	if rec == nil {
		return out, nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("the params record %T cannot be recorded (is a field NaN or infinite?): %w", rec, err)
	}
	if string(b) == "null" {
		return out, nil
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("the params record %T is not a JSON object: %w", rec, err)
	}
	return out, nil
}

// Keys returns the JSON keys a record type can write (its fields' names,
// embedded structs' flattened), sorted. rec is a record or a pointer to one.
func Keys(rec any) []string {
	t := reflect.TypeOf(rec)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	walk(t)
	sort.Strings(keys)
	return keys
}

// DecodeRow reads a charge row's params: the mechanism (validated), and the
// rest into rec (a pointer to a params record), refusing a key that is
// neither the mechanism's, nor rec's, nor a quote's (noise_tv,
// quote_epsilon, quote_delta). It reads rows written before the records
// were typed: their keys are the records'.
func DecodeRow(params []byte, rec any) (Mechanism, error) {
	m, err := Parse(params)
	if err != nil {
		return m, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(params, &raw); err != nil {
		return m, fmt.Errorf("params are not a JSON object: %w", err)
	}
	known := map[string]bool{KeyNoiseTV: true, KeyQuoteEpsilon: true, KeyQuoteDelta: true}
	for _, k := range Keys(Mechanism{}) {
		known[k] = true
	}
	own := map[string]bool{}
	for _, k := range Keys(rec) {
		own[k] = true
	}
	rest := map[string]json.RawMessage{}
	for k, v := range raw {
		switch {
		case own[k]:
			rest[k] = v
		case !known[k]:
			return m, fmt.Errorf("params key %q belongs neither to the mechanism nor to the %T record", k, rec)
		}
	}
	b, _ := json.Marshal(rest)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return m, fmt.Errorf("params do not decode as a %T record: %w", rec, err)
	}
	return m, nil
}
