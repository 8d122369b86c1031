package sqlfuncs

import (
	"fmt"
	"math"
	"strings"
)

// argError is an error about one SQL argument.
func argError(fn, name, format string, a ...any) error {
	return fmt.Errorf("%s: %s %s", fn, name, fmt.Sprintf(format, a...))
}

// number converts a SQL argument to a finite float64, rejecting NULL, TEXT,
// BLOB, NaN and Inf.
func number(fn, name string, v any) (float64, error) {
	var x float64
	switch t := v.(type) {
	case int64:
		x = float64(t)
	case float64:
		x = t
	case []byte:
		if t != nil {
			return 0, argError(fn, name, "must be a number, got a BLOB; for a float32 vector, sum rows with dp_vec_sum(x, clip, mu) (clipped and noisy) or add noise with dp_gaussian(x, sensitivity, mu)")
		}
		return 0, argError(fn, name, "must be a number, got NULL")
	default:
		return 0, argError(fn, name, "must be a number, got %s", typeName(v))
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, argError(fn, name, "must be finite, got %v", x)
	}
	return x, nil
}

func positive(fn, name string, v any) (float64, error) {
	x, err := number(fn, name, v)
	if err != nil {
		return 0, err
	}
	if x <= 0 {
		return 0, argError(fn, name, "must be > 0, got %v", x)
	}
	return x, nil
}

func probability(fn, name string, v any) (float64, error) {
	x, err := number(fn, name, v)
	if err != nil {
		return 0, err
	}
	if !(x > 0 && x < 1) {
		return 0, argError(fn, name, "must lie strictly between 0 and 1, got %v", x)
	}
	return x, nil
}

func text(fn, name string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", argError(fn, name, "must be TEXT, got %s", typeName(v))
	}
	if s == "" {
		return "", argError(fn, name, "must not be empty")
	}
	return s, nil
}

func arity(fn string, args []any, min, max int, usage string) error {
	if len(args) < min || len(args) > max {
		return fmt.Errorf("%s: takes %s, got %d arguments", fn, usage, len(args))
	}
	return nil
}

// mechanismError names the SQL function fn in an error of a release package,
// in place of the package's own prefix ("avgmix: ", "dfs: "), so that the
// message names one function once: "dp_avgmix: m = 500 exceeds n = 100".
func mechanismError(fn string, err error) error {
	msg := err.Error()
	for _, pkg := range []string{"avgmix: ", "dfs: ", "release: "} {
		msg = strings.TrimPrefix(msg, pkg)
	}
	return &fnError{msg: fn + ": " + msg, err: err}
}

// fnError is an error reworded for the SQL surface; it unwraps to the
// original.
type fnError struct {
	msg string
	err error
}

func (e *fnError) Error() string { return e.msg }
func (e *fnError) Unwrap() error { return e.err }
