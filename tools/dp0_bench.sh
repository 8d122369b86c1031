#!/usr/bin/env bash
# Per-row cost of dpsql's SQL functions through the loadable extension dp0 (in
# Debian's sqlite3 shell) against the Go driver (the dpsql command), measured
# in turn in one run: a scalar function (dp_vec_select over 1,000,000 rows,
# less the same scan without it) and dp_avgmix on Fashion-MNIST (60000 x 784,
# package dataset-fashion-mnist). Prints wall/cpu seconds (cpu = user + sys)
# of each whole process. Usage: bash tools/dp0_bench.sh [workdir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$(mktemp -d)}
mkdir -p "$B"
(cd "$root" && go build -buildmode=c-shared -o "$B/dp0.so" ./cmd/dp0 && go build -o "$B/dpsql" ./cmd/dpsql)
cd "$B"
t() { /usr/bin/time -f "%e/%U/%S" "$@" 2>&1 >/dev/null | tail -1 | awk -F/ '{printf "%s/%.2f", $1, $2 + $3}'; }
uptime
rm -f s.db*
./dpsql init s.db --mu 1000 >/dev/null
sqlite3 s.db "CREATE TABLE v AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) SELECT i, zeroblob(16) AS x FROM n"
base="SELECT count(length(x)) FROM v"
scal="SELECT count(dp_vec_select(x, '[0]')) FROM v"
for rep in 1 2 3 4 5; do
  echo "rep $rep scan+scalar, scan: dp0 $(t sqlite3 s.db '.load ./dp0' "$scal") $(t sqlite3 s.db '.load ./dp0' "$base")  go $(t ./dpsql query s.db "$scal") $(t ./dpsql query s.db "$base")"
done
fm=/usr/share/datasets/fashion-mnist
if [ ! -f fm.db ]; then
  ./dpsql init fm.db --mu 1000 >/dev/null
  ./dpsql import fm.db train $fm/train-images-idx3-ubyte.gz --labels $fm/train-labels-idx1-ubyte.gz >/dev/null
fi
q="SELECT dp_avgmix(features, label, json_object('n',60000,'into','rel','mu',1.0,'m',64,'classes',10)) FROM train"
for rep in 1 2 3; do
  rm -f a.db* b.db*; cp fm.db a.db; cp fm.db b.db
  echo "rep $rep dp_avgmix: dp0 $(t sqlite3 a.db '.load ./dp0' "$q")  go $(t ./dpsql query b.db "$q")"
done
uptime
