package sqlfuncs

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Every SQL function's arguments are declared once, as a signature: its
// name and, for each form it takes, each argument's name and what it must be
// (a finite number, one > 0, a probability, TEXT, one of a few words, or any
// value the body decodes itself). call checks the number of arguments and
// each argument against the form that number selects, before the body runs,
// and names the function once in every error the body returns.

// check is what one argument must be: it converts a SQL value, or says what
// is wrong with it in words a user knows.
type check func(v any) (any, error)

// param is one declared argument.
type param struct {
	name  string
	check check
}

// signature is one SQL function's name and the forms it takes.
type signature struct {
	name  string
	forms [][]param // each a list of arguments; a form is chosen by its length
}

// fn declares a function of exactly these arguments.
func fn(name string, params ...param) signature {
	return signature{name: name, forms: [][]param{params}}
}

// optional adds forms that take the first 1, 2, ... of more after those the
// signature already has: fn("f", a).optional(b, c) takes (a), (a, b) or
// (a, b, c).
func (s signature) optional(more ...param) signature {
	last := s.forms[len(s.forms)-1]
	for i := range more {
		s.forms = append(s.forms, append(append([]param{}, last...), more[:i+1]...))
	}
	return s
}

// or adds a form of other arguments.
func (s signature) or(params ...param) signature {
	s.forms = append(s.forms, params)
	return s
}

// usage spells the forms: "(mu [, delta [, scope]])", or each form joined
// by "or".
func (s signature) usage() string {
	if len(s.forms) == 1 && len(s.forms[0]) == 0 {
		return "no arguments"
	}
	nested := len(s.forms) > 1
	for i := 1; i < len(s.forms) && nested; i++ {
		prev, cur := s.forms[i-1], s.forms[i]
		nested = len(cur) == len(prev)+1 && sameNames(cur[:len(prev)], prev)
	}
	names := func(ps []param) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.name
		}
		return out
	}
	if nested {
		first := s.forms[0]
		var b strings.Builder
		b.WriteString("(" + strings.Join(names(first), ", "))
		for _, f := range s.forms[1:] {
			if len(f) == 1 {
				b.WriteString("[" + f[len(f)-1].name)
			} else {
				b.WriteString(" [, " + f[len(f)-1].name)
			}
		}
		b.WriteString(strings.Repeat("]", len(s.forms)-1) + ")")
		return b.String()
	}
	forms := make([]string, len(s.forms))
	for i, f := range s.forms {
		forms[i] = "(" + strings.Join(names(f), ", ") + ")"
	}
	return strings.Join(forms, " or ")
}

func sameNames(a, b []param) bool {
	for i := range a {
		if a[i].name != b[i].name {
			return false
		}
	}
	return true
}

// maxParams is the most arguments a form declares.
const maxParams = 5

// args are a call's arguments, checked against the form their number chose.
type args struct {
	form []param
	vals [maxParams]any
}

// parse checks the arguments of a call.
func (s signature) parse(raw []any) (*args, error) {
	for _, f := range s.forms {
		if len(f) != len(raw) {
			continue
		}
		a := &args{form: f}
		for i, p := range f {
			v, err := p.check(raw[i])
			var d detail
			if errors.As(err, &d) {
				return nil, fmt.Errorf("%s: %w", p.name, d.error)
			}
			if err != nil {
				return nil, fmt.Errorf("%s %w", p.name, err)
			}
			a.vals[i] = v
		}
		return a, nil
	}
	return nil, fmt.Errorf("takes %s, got %d arguments", s.usage(), len(raw))
}

// has reports whether the call's form has the argument name.
func (a *args) has(name string) bool { return a.index(name) >= 0 }

func (a *args) index(name string) int {
	for i, p := range a.form {
		if p.name == name {
			return i
		}
	}
	return -1
}

// value returns the argument name as its check converted it, or def when the
// call's form does not have it.
func (a *args) value(name string, def any) any {
	if i := a.index(name); i >= 0 {
		return a.vals[i]
	}
	return def
}

// num returns the number argument name, or def when the form lacks it.
func (a *args) num(name string, def float64) float64 { return a.value(name, def).(float64) }

// str returns the TEXT argument name, or def when the form lacks it.
func (a *args) str(name string, def string) string { return a.value(name, def).(string) }

// raw returns the argument name as SQLite passed it (nil when absent).
func (a *args) raw(name string) any { return a.value(name, nil) }

// Argument declarations.

// number is a finite number (an INTEGER or a REAL).
func number(name string) param { return param{name, finite} }

// positive is a finite number > 0.
func positive(name string) param { return param{name, above(0)} }

// nonNegative is a finite number >= 0.
func nonNegative(name string) param {
	return param{name, func(v any) (any, error) {
		x, err := finiteNumber(v)
		if err == nil && x < 0 {
			err = fmt.Errorf("must be >= 0, got %v", x)
		}
		return x, err
	}}
}

// probability is a number strictly between 0 and 1.
func probability(name string) param { return between(name, 1) }

// between is a number strictly between 0 and hi.
func between(name string, hi float64) param {
	return param{name, func(v any) (any, error) {
		x, err := finiteNumber(v)
		if err == nil && !(x > 0 && x < hi) {
			err = fmt.Errorf("must lie strictly between 0 and %v, got %v", hi, x)
		}
		return x, err
	}}
}

// text is non-empty TEXT.
func text(name string) param { return param{name, nonEmptyText} }

// oneOf is TEXT that is one of words, each followed by what it means.
func oneOf(name string, words ...string) param {
	return param{name, func(v any) (any, error) {
		s, err := nonEmptyText(v)
		if err != nil {
			return s, err
		}
		var want []string
		for i := 0; i+1 < len(words); i += 2 {
			if s == words[i] {
				return s, nil
			}
			want = append(want, fmt.Sprintf("'%s' (%s)", words[i], words[i+1]))
		}
		return s, fmt.Errorf("must be %s, got %q", strings.Join(want, " or "), s)
	}}
}

// vectorArg is a vector (float32 BLOB or JSON array TEXT), decoded.
func vectorArg(name string) param {
	return param{name, func(v any) (any, error) {
		if b, ok := v.([]byte); v == nil || ok && b == nil {
			return nil, errors.New("is NULL")
		}
		x, err := decodeVector(v)
		if err != nil {
			return nil, detail{err}
		}
		return x, nil
	}}
}

// detail is a check's error that follows the argument's name after a colon
// ("x: vector blob has 7 bytes, ..."), where other errors follow it as a
// predicate ("mu must be > 0, got -1").
type detail struct{ error }

func (d detail) Unwrap() error { return d.error }

// value is any SQL value, which the body decodes itself (a vector, JSON).
func value(name string) param { return param{name, func(v any) (any, error) { return v, nil }} }

func finite(v any) (any, error) { return finiteNumber(v) }

func above(lo float64) check {
	return func(v any) (any, error) {
		x, err := finiteNumber(v)
		if err == nil && x <= lo {
			err = fmt.Errorf("must be > %v, got %v", lo, x)
		}
		return x, err
	}
}

// finiteNumber converts a SQL argument to a finite float64, rejecting NULL,
// TEXT, BLOB, NaN and Inf.
func finiteNumber(v any) (float64, error) {
	var x float64
	switch t := v.(type) {
	case int64:
		x = float64(t)
	case float64:
		x = t
	case []byte:
		if t != nil {
			return 0, errors.New("must be a number, got a BLOB; for a float32 vector, sum rows with dp_vec_sum(x, clip, mu) (clipped and noisy) or add noise with dp_gaussian(x, sensitivity, mu)")
		}
		return 0, errors.New("must be a number, got NULL")
	default:
		return 0, fmt.Errorf("must be a number, got %s", typeName(v))
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("must be finite, got %v", x)
	}
	return x, nil
}

func nonEmptyText(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be TEXT, got %s", typeName(v))
	}
	if s == "" {
		return "", errors.New("must not be empty")
	}
	return s, nil
}

// argError is an error about one SQL argument (or option) of fn.
func argError(fn, name, format string, a ...any) error {
	return fmt.Errorf("%s: %s %s", fn, name, fmt.Sprintf(format, a...))
}

// checkNumber checks v, an argument of fn that is not a call's own
// (an aggregate's per-row constant, a number read from JSON options),
// against p: the number, or an error naming fn and p.
func checkNumber(fn string, p param, v any) (float64, error) {
	x, err := p.check(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %s %w", fn, p.name, err)
	}
	return x.(float64), nil
}

// named makes err an error of the SQL function fn: its message names fn
// once, in place of a release package's own prefix ("avgmix: ", "dfs: ") if
// it has one ("dp_avgmix: m = 500 exceeds n = 100"); a message that already
// names fn is left as it is. It unwraps to err.
func named(fn string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.HasPrefix(msg, fn+": ") {
		return err
	}
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
