package sqlfuncs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/dpsql/dpsql/internal/jsonkeys"
)

func sameOptions(first []byte, v any) bool {
	switch o := v.(type) {
	case string:
		return string(first) == o
	case []byte:
		return o != nil && bytes.Equal(first, o)
	}
	return false
}

// optionBytes returns the options argument as JSON bytes.
func optionBytes(fn string, v any) ([]byte, error) {
	switch o := v.(type) {
	case string:
		return []byte(o), nil
	case []byte:
		if o == nil {
			return nil, fmt.Errorf("%s: options are NULL; pass json_object(...)", fn)
		}
		return o, nil
	default:
		return nil, fmt.Errorf("%s: options must be a JSON object (json_object(...)), got %s", fn, typeName(v))
	}
}

// decodeOptions decodes JSON options into dst (a pointer to a struct with json
// tags), rejecting unknown keys with the list of known ones. A whole number
// written as a float (20.0, which json_object makes of a REAL) is accepted
// where an integer is expected.
func decodeOptions(fn string, data []byte, dst any) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return fmt.Errorf("%s: options are not a JSON object (pass json_object(...)); got %s", fn, abbreviateJSON(data))
	}
	// json_object('mu', 1, 'mu', 2) makes {"mu":1,"mu":2}: a key given
	// twice (or in two cases) is refused, not resolved to one of them.
	if err := jsonkeys.Check(data); err != nil {
		return fmt.Errorf("%s: options: %v", fn, err)
	}
	fields := optionFields(dst)
	for k, v := range raw {
		f, ok := fields[strings.ToLower(k)]
		if !ok {
			return fmt.Errorf("%s: unknown option %q (known options: %s)", fn, k, strings.Join(knownOptions(dst), ", "))
		}
		if isInteger(f.Type) {
			if n, ok := wholeNumber(v); ok {
				raw[k] = n
			}
		}
	}
	norm, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("%s: options: %w", fn, err)
	}
	if err := json.Unmarshal(norm, dst); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			want := "a number"
			switch {
			case isInteger(ute.Type):
				want = "an integer"
			case ute.Type.Kind() == reflect.String:
				want = "TEXT"
			case ute.Type.Kind() == reflect.Bool:
				want = "true or false"
			}
			got := ute.Value
			for k, v := range raw {
				if strings.EqualFold(k, ute.Field) {
					got = abbreviateJSON(v)
				}
			}
			return fmt.Errorf("%s: option %q must be %s, got %s", fn, ute.Field, want, got)
		}
		return fmt.Errorf("%s: options: %w", fn, err)
	}
	return nil
}

// optionFields maps the lower-cased JSON names of dst's fields to the fields
// (encoding/json matches option names case-insensitively).
func optionFields(dst any) map[string]reflect.StructField {
	t := reflect.TypeOf(dst).Elem()
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[strings.ToLower(name)] = f
	}
	return out
}

func isInteger(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// wholeNumber rewrites a JSON number with a fraction or exponent that is a
// whole number of magnitude at most 2^53 (20.0, 2e1) as an integer literal.
func wholeNumber(v json.RawMessage) (json.RawMessage, bool) {
	s := strings.TrimSpace(string(v))
	if !strings.ContainsAny(s, ".eE") || s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return nil, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(int64(x), 10)), true
}

// abbreviateJSON shows a JSON value in an error message, shortened.
func abbreviateJSON(b []byte) string {
	s := strings.TrimSpace(string(b))
	if r := []rune(s); len(r) > 40 {
		s = string(r[:39]) + "…"
	}
	if s == "" {
		return "nothing"
	}
	return s
}

// knownOptions lists dst's option names for error messages; "seed" only in
// builds where it works (-tags dpsql_testseed).
func knownOptions(dst any) []string {
	var keys []string
	t := reflect.TypeOf(dst).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || (name == "seed" && !seedOption) {
			continue
		}
		keys = append(keys, name)
	}
	sort.Strings(keys)
	return keys
}
