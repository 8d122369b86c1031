module dpsql.test/googleacc

go 1.26.8

require github.com/google/differential-privacy/go/v3 v3.0.0

require (
	github.com/golang/glog v1.2.0 // indirect
	golang.org/x/exp v0.0.0-20240222234643-814bf88cf225 // indirect
	gonum.org/v1/gonum v0.14.0 // indirect
)
