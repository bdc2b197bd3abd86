#!/usr/bin/python3
"""validate_results.py — checks a dlhost results file (JSON lines) against docs/results-schema.json
and against what a run of a given suite must have produced.

Usage: validate_results.py SCHEMA RESULTS [--cases N] [--status ID=STATUS ...]
Exit 0 when every record validates, the count matches and each named case has its status.
Uses Debian's python3-jsonschema (Draft 2020-12).
"""
import argparse
import json
import sys

import jsonschema


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("schema")
    ap.add_argument("results")
    ap.add_argument("--cases", type=int, help="number of records expected")
    ap.add_argument("--status", action="append", default=[], help="CASE_ID=STATUS expected")
    args = ap.parse_args()

    with open(args.schema) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    errors = 0
    records = {}
    with open(args.results) as f:
        for n, line in enumerate(f, 1):
            record = json.loads(line)
            for e in validator.iter_errors(record):
                path = "/".join(str(p) for p in e.absolute_path)
                print(f"{args.results}:{n}: {record.get('case_id')}: {path}: {e.message}")
                errors += 1
            records[record["case_id"]] = record
            if record["status"] == "OK":
                t = record["timing"]
                if len(t["samples"]["step"]) != t["iterations"]:
                    print(f"{args.results}:{n}: raw samples do not match the iteration count")
                    errors += 1
    if args.cases is not None and len(records) != args.cases:
        print(f"expected {args.cases} records, found {len(records)}")
        errors += 1
    for expect in args.status:
        case_id, status = expect.rsplit("=", 1)  # ids may contain "=" themselves
        got = records.get(case_id, {}).get("status", "<missing>")
        if got != status:
            print(f"case {case_id}: expected {status}, got {got}")
            errors += 1
    print(f"{len(records)} records, {errors} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
