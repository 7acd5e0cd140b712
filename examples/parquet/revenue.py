#!/usr/bin/env python3
"""Revenue per region over Parquet rows (examples/parquet/job.yaml).

    revenue.py map     reads rows, one JSON object a line, and writes one
                       "region<TAB>sum" line per region of its split.
    revenue.py reduce  reads "region<TAB>sum" lines and writes the totals,
                       one JSON record a line sorted by region,
                       {"region": "eu", "total": "12.50"}, which the stage
                       writes as a Parquet file (output: {format: parquet}).

Amounts are Parquet DECIMALs, which arrive as strings carrying their scale
("12.50"), so the sums are exact with decimal.Decimal. A null region or
amount is skipped. Standard library only.
"""
import collections
import decimal
import json
import sys


def add(sums, region, amount):
    sums[region] += decimal.Decimal(amount)


def main(mode):
    sums = collections.defaultdict(decimal.Decimal)
    for line in sys.stdin:
        if mode == "map":
            row = json.loads(line)
            if row.get("region") is not None and row.get("amount") is not None:
                add(sums, row["region"], row["amount"])
        else:
            region, amount = line.rstrip("\n").split("\t")
            add(sums, region, amount)
    for region in sorted(sums):
        if mode == "map":
            sys.stdout.write(f"{region}\t{sums[region]}\n")
        else:
            # A decimal as a string keeps its digits exactly.
            sys.stdout.write(json.dumps({"region": region, "total": str(sums[region])}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("map", "reduce"):
        sys.exit("usage: revenue.py map|reduce")
    main(sys.argv[1])
