"""Writes Parquet files with DuckDB, and beside each the rows DuckDB reads
back from it as JSON Lines in the reader's conventions: the expectation
the Go tests hold shared/split/parquet to.

    .venv/bin/python shared/split/parquet/testdata/gen.py [DIR] [ROWS]

DIR defaults to this folder (the checked-in files); ROWS to 5000. Every
file holds the same rows, so one expectation serves them all:
rows.jsonl.gz. (DuckDB sizes row groups in multiples of 2,048 rows.)
"""
import base64
import datetime
import decimal
import json
import os
import sys

import gzip

import duckdb

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 5000

# Every kind of value the reader converts, with nulls, dictionary-encoded
# strings, nested structs, lists (empty, null, holding nulls) and maps.
TABLE = f"""
SELECT
  i::BIGINT AS id,
  (i % 7 - 3)::INTEGER AS small,
  (i * 7)::UINTEGER AS unsigned,
  CASE WHEN i % 5 = 0 THEN NULL ELSE 'name-' || (i % 13) END AS name,
  (i * 1.25 - 100)::DECIMAL(10, 2) AS price,
  (i * 123456789012345 - 5)::DECIMAL(38, 4) AS big,
  (i / 3.0)::DOUBLE AS ratio,
  i % 2 = 0 AS even,
  TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i) SECOND + INTERVAL (i * 1234) MICROSECOND AS ts,
  TIMESTAMPTZ '2023-06-30 23:59:59+00' + INTERVAL (i) MINUTE AS tstz,
  DATE '1969-12-25' + i::INTEGER AS day,
  CASE WHEN i % 11 = 0 THEN NULL ELSE unhex(printf('%06x', i * 2654435761 % 16777216)) END AS bin,
  {{'a': i, 'b': CASE WHEN i % 3 = 0 THEN NULL ELSE 'x' || i END}} AS s,
  CASE WHEN i % 4 = 0 THEN NULL WHEN i % 4 = 1 THEN []::BIGINT[] ELSE [i, NULL, i + 1] END AS l,
  [{{'k': i, 'v': ['p', 'q'][1:(i % 3)]}}, NULL] AS ls,
  CASE WHEN i % 6 = 0 THEN NULL ELSE MAP {{'one': i, 'two': NULL}} END AS m
FROM range({rows}) t(i)
"""

FILES = {
    # name: (codec, row group size)
    "snappy": ("snappy", 2048),
    "zstd": ("zstd", 2048),
    "gzip": ("gzip", 1000000),  # one row group
}


def convert(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        s = v.strftime("%Y-%m-%dT%H:%M:%S")
        if v.microsecond:
            s += ("." + "%06d" % v.microsecond).rstrip("0")
        return s + "Z"
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        if set(v) == {"key", "value"} and isinstance(v["key"], list):  # a MAP, as some versions return it
            return {str(k): convert(x) for k, x in zip(v["key"], v["value"])}
        return {str(k): convert(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [convert(x) for x in v]
    raise TypeError(f"no JSON for {type(v)}: {v!r}")


con = duckdb.connect()
con.execute("SET threads = 1")  # one writer: row groups exactly as sized
con.execute("SET TimeZone = 'UTC'")
expected = None
for name, (codec, group) in FILES.items():
    path = os.path.join(out, name + ".parquet")
    con.execute(f"COPY ({TABLE}) TO '{path}' (FORMAT parquet, COMPRESSION {codec}, ROW_GROUP_SIZE {group})")
    # Instants read back as UTC wall times: Python needs pytz otherwise.
    tz = [c for c, t, *_ in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall() if t == "TIMESTAMP WITH TIME ZONE"]
    utc = ", ".join("timezone('UTC', %s) AS %s" % (c, c) for c in tz)
    replace = "REPLACE (%s)" % utc if tz else ""
    cur = con.execute(f"SELECT * {replace} FROM read_parquet('{path}')")
    cols = [d[0] for d in cur.description]
    text = "".join(json.dumps({c: convert(v) for c, v in zip(cols, row)}) + "\n" for row in cur.fetchall())
    if expected is None:
        expected = text
    elif text != expected:
        sys.exit(f"{path} reads back other rows than the first file")
# mtime 0: regenerating unchanged rows leaves the file unchanged.
with gzip.GzipFile(os.path.join(out, "rows.jsonl.gz"), "wb", mtime=0) as f:
    f.write(expected.encode())
