package main

import (
	"encoding/binary"
	"math"

	"github.com/dpsql/dpsql/npy"
)

// npyBytes encodes an array as numpy.save does.
var npyBytes = npy.Encode

func f32Bytes(order binary.AppendByteOrder, xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = order.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64Bytes(order binary.AppendByteOrder, xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = order.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func i64Bytes(xs ...int64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}
