module github.com/dpsql/dpsql

go 1.26.8
