package accountant

import "github.com/dpsql/dpsql/mechanism"

// Byte-level helpers for the tests of the encoded composition: extend or
// read a composition given as its MarshalBinary encoding.

func composeInto(cached []byte, m mechanism.Mechanism) ([]byte, error) {
	var c Composition
	if err := c.UnmarshalBinary(cached); err != nil {
		return nil, err
	}
	c, err := c.Add(m)
	if err != nil {
		return nil, err
	}
	return c.MarshalBinary()
}

func cachedEpsilon(cached []byte, delta float64) (float64, error) {
	var c Composition
	if err := c.UnmarshalBinary(cached); err != nil {
		return 0, err
	}
	return c.Epsilon(delta)
}

func cachedDelta(cached []byte, epsilon float64) (float64, error) {
	var c Composition
	if err := c.UnmarshalBinary(cached); err != nil {
		return 0, err
	}
	return c.Delta(epsilon)
}

func cachedCount(cached []byte) (int64, error) {
	var c Composition
	if err := c.UnmarshalBinary(cached); err != nil {
		return 0, err
	}
	return c.Count(), nil
}
