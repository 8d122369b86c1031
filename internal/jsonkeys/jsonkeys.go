// Package jsonkeys refuses JSON whose objects name a key twice. Go's
// encoding/json keeps the last of two equal keys and matches struct fields
// case-insensitively, so {"sql": "A", "SQL": "B"} and json_object('mu', 1,
// 'mu', 2) would each pass one value while another program reading the same
// text could take the other: dpsql refuses such input outright (RFC 8259
// section 4 leaves duplicate names' meaning to each parser).
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Check returns an error if data is not one JSON value, or if any of its
// objects, at any depth, has two keys equal or equal but for case, under
// Unicode's simple case folding as encoding/json matches names ("ſql" and
// "K" with the Kelvin sign match "sql" and "k").
func Check(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := value(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// value reads one value from dec, checking the keys of its objects.
func value(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		for dec.More() {
			if err := value(dec); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]string{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if prev, ok := seen[fold(key)]; ok {
				if prev == key {
					return fmt.Errorf("the key %q appears twice in one JSON object: give each key once", key)
				}
				return fmt.Errorf("the keys %q and %q differ only in case in one JSON object: give each key once, in lower case", prev, key)
			}
			seen[fold(key)] = key
			if err := value(dec); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// fold maps each rune of s to the least rune of its simple case-folding
// orbit, so that two strings fold alike exactly when strings.EqualFold (and
// encoding/json's name matching) finds them equal.
func fold(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}
