#!/usr/bin/env python3
"""Check a dpsql ledger's hash chain with nothing but Python's standard library.

Usage: python3 tools/verify_ledger.py DB [--head ID:HASH] [--immutable] [--each]

Recomputes, in id order, the SHA-256 of every row of dp_ledger over its
canonical form (specified in docs/ledger.md) and checks that
it equals the row's hash and that the row's prev_hash is the previous row's
hash (64 zeros for the first row). With --head ID:HASH (as printed by
`dpsql audit head DB`), the chain must still contain that exact row.

This is the chain check of `dpsql audit verify` done independently of dpsql's
code; it does not re-account the rows (that each row's mu matches its
mechanism), nor check the triggers and derived tables, which `dpsql audit
verify` also does.

The file is opened read-only (mode=ro); --immutable adds immutable=1 for a WAL
file whose -shm file is missing in a directory you cannot write (only when no
process writes the file). --each prints one line per row: its id, the hash
computed here, and "ok" or what is wrong.

It reads ledgers of schema versions 0 to 2 (PRAGMA user_version; the chain's
canonical forms are the same in versions 1 and 2, which differ only in the
dp_budget_status view) and prints the version; a file of a later version was
written by a newer dpsql and is refused (exit 2), as dpsql refuses it.

Exit status: 0 when the chain is intact, 1 at the first problem, 2 for a
usage mistake or a file that cannot be read as a dpsql ledger.
"""

import argparse
import hashlib
import math
import re
import sqlite3
import sys
import urllib.parse

GENESIS = "0" * 64
SCHEMA_VERSION = 2  # the latest ledger schema version this verifier reads (PRAGMA user_version)

# The bytes Go's encoding/json escapes in a string, besides other control
# characters (< 0x20, written \u00XX with lowercase hex).
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json_string(data):
    """Encode bytes as Go's json.Marshal encodes a Go string holding them.

    Valid UTF-8 sequences become their characters (escaped as above, else raw
    UTF-8); each byte that does not start a valid sequence becomes \\ufffd, as
    Go's utf8.DecodeRuneInString reads it (an error of width 1).
    """
    out = ['"']
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c < 0x80:
            ch = chr(c)
            if ch in _ESCAPES:
                out.append(_ESCAPES[ch])
            elif c < 0x20:
                out.append("\\u%04x" % c)
            else:
                out.append(ch)
            i += 1
            continue
        width = 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 else 0
        ch = None
        if width and i + width <= n:
            try:
                ch = data[i:i + width].decode("utf-8")  # strict: no overlongs, no surrogates
            except UnicodeDecodeError:
                ch = None
        if ch is None:
            out.append("\\ufffd")
            i += 1
            continue
        out.append(_ESCAPES.get(ch, ch))
        i += width
    out.append('"')
    return "".join(out)


def go_mu(mu):
    """mu as Go's strconv.FormatFloat(mu, 'g', 17, 64) prints it."""
    if math.isinf(mu):
        return "+Inf" if mu > 0 else "-Inf"
    if math.isnan(mu):
        return "NaN"
    return format(mu, ".17g")  # C's %.17g: the same digits, exponent and trimming


def canonical(row):
    """The canonical form of a row (a dict), as UTF-8 bytes."""
    text = [go_json_string(row[k]) for k in ("at", "kind", "scope", "mechanism")]
    at, kind, scope, mechanism = text
    mu = go_json_string(go_mu(row["mu"]).encode())
    params, query, prev = (go_json_string(row[k]) for k in ("params", "query", "prev_hash"))
    if row["form"] == 0:
        fields = [str(row["id"]), at, scope, mechanism, mu, params, query, prev]
    else:
        fields = ["1", str(row["id"]), at, kind, scope, mechanism, mu, params, query, prev]
    return ("[" + ",".join(fields) + "]").encode("utf-8")


class LedgerError(Exception):
    """The file cannot be read as a dpsql ledger (exit status 2)."""


def _text(value, column, rowid):
    if isinstance(value, bytes):  # TEXT (text_factory=bytes) or BLOB: Go reads both as bytes
        return value
    raise LedgerError("row %s: column %s holds %r, not text; dpsql reads this column as text" % (rowid, column, value))


def read_rows(path, immutable):
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:
        raise LedgerError("cannot open %s read-only: %s" % (path, e))
    con.text_factory = bytes
    try:
        try:
            names = {r[0].decode("utf-8", "replace") for r in con.execute("SELECT name FROM pragma_table_info('dp_ledger')")}
        except sqlite3.Error as e:
            raise LedgerError("cannot read %s: %s (a WAL file whose -shm file is missing in a directory you cannot write needs --immutable)" % (path, e))
        if not names:
            raise LedgerError("%s has no dp_ledger table: it is not a dpsql ledger" % path)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError("%s was written by a newer dpsql (ledger schema version %d; this verifier reads up to %d): "
                              "use the verify_ledger.py of that dpsql" % (path, version, SCHEMA_VERSION))
        if version < 0:
            raise LedgerError("%s says ledger schema version %d (PRAGMA user_version), which no dpsql writes: the version was changed"
                              % (path, version))
        extra = "kind, form" if {"kind", "form"} <= names else "CAST('charge' AS TEXT), 0"
        rows = []
        for r in con.execute("SELECT id, at, scope, mechanism, mu, params, coalesce(query, ''), prev_hash, hash, "
                             + extra + " FROM dp_ledger ORDER BY id"):
            rid = r[0]
            if not isinstance(rid, int):
                raise LedgerError("a row's id is %r, not an integer" % (rid,))
            mu = r[4]
            if isinstance(mu, int):
                mu = float(mu)
            if not isinstance(mu, float):
                raise LedgerError("row %d: mu is %r, not a number" % (rid, mu))
            form = r[10]
            row = {
                "id": rid, "at": _text(r[1], "at", rid), "scope": _text(r[2], "scope", rid),
                "mechanism": _text(r[3], "mechanism", rid), "mu": mu, "params": _text(r[5], "params", rid),
                "query": _text(r[6], "query", rid), "prev_hash": _text(r[7], "prev_hash", rid),
                "hash": _text(r[8], "hash", rid), "form": form,
            }
            kind = r[9]
            row["kind"] = _text(kind, "kind", rid) if kind is not None else b"charge"
            if row["kind"] == b"":
                row["kind"] = b"charge"  # dpsql reads an empty kind as a charge
            rows.append(row)
        return version, rows
    finally:
        con.close()


def check(rows, each=None):
    """Check the chain; return (number of good rows, problem or None)."""
    prev = GENESIS.encode()
    for i, row in enumerate(rows):
        problem = None
        digest = hashlib.sha256(canonical(row)).hexdigest() if row["form"] in (0, 1) else ""
        if row["prev_hash"] != prev:
            problem = ("prev_hash %s... does not match the previous row's hash %s... (a row was removed, inserted or reordered)"
                       % (row["prev_hash"][:12].decode("utf-8", "replace"), prev[:12].decode("utf-8", "replace")))
        elif row["form"] not in (0, 1):
            problem = "unknown canonical form %r" % (row["form"],)
        elif digest.encode() != row["hash"]:
            problem = "its content does not match its hash (the row was edited)"
        if each is not None:
            each.write("%d %s %s\n" % (row["id"], digest or "-", problem or "ok"))
        if problem:
            return i, "row %d: %s" % (row["id"], problem)
        prev = row["hash"]
    return len(rows), None


def main(argv):
    ap = argparse.ArgumentParser(description="Check a dpsql ledger's hash chain (Python standard library only).")
    ap.add_argument("db", help="the database file")
    ap.add_argument("--head", help="ID:HASH, as `dpsql audit head DB` prints: the chain must still contain that row")
    ap.add_argument("--immutable", action="store_true", help="open with immutable=1 (only when no process writes the file)")
    ap.add_argument("--each", action="store_true", help="print one line per row: id, computed hash, verdict")
    args = ap.parse_args(argv)
    head = None
    if args.head is not None:
        m = re.fullmatch(r"(0|[1-9][0-9]{0,18}):([0-9a-f]{64})", args.head.strip())
        if not m:
            ap.error("--head %r is not ID:HASH (a decimal id, a colon and 64 lowercase hex digits)" % args.head)
        head = (int(m.group(1)), m.group(2).encode())
    try:
        version, rows = read_rows(args.db, args.immutable)
    except LedgerError as e:
        print("verify_ledger: %s" % e, file=sys.stderr)
        return 2
    good, problem = check(rows, sys.stdout if args.each else None)
    if problem:
        print("verify_ledger: ledger hash chain broken after %d good rows: %s" % (good, problem), file=sys.stderr)
        return 1
    if head is not None and head != (0, GENESIS.encode()):
        if not any(r["id"] == head[0] and r["hash"] == head[1] for r in rows):
            print("verify_ledger: the chain does not contain the kept head %d:%s (the ledger was truncated or rewritten)"
                  % (head[0], head[1].decode()), file=sys.stderr)
            return 1
    last = rows[-1] if rows else {"id": 0, "hash": GENESIS.encode()}
    print("ledger chain OK: %d rows (schema version %d)" % (len(rows), version))
    print("head %d:%s" % (last["id"], last["hash"].decode("utf-8", "replace")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
