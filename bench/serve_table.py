"""Rows of bench/serve.sh's table from serve_load.py's JSON lines (one per phase, in order).

--last prints the newest phase; --medians the median ratios over the phases repeated. Each ratio compares a
phase with the one-stream phase run last before it (alternated runs on a noisy machine pair up that way).
Decode tok/s = streams / ITL p50.
"""
import json
import statistics
import sys


def decode_tok_s(r):
    return r["streams"] * 1000.0 / r["itl_p50_ms"] if r["itl_p50_ms"] > 0 else 0.0


def paired(runs):
    one = None
    for r in runs:
        if r["streams"] == 1:
            one = r
        yield r, one or r


def main():
    runs = [json.loads(line) for line in open(sys.argv[1])]
    if sys.argv[2] == "--last":
        r, one = list(paired(runs))[-1]
        agg = r["aggregate_tok_s"] / one["aggregate_tok_s"]
        dec = decode_tok_s(r) / decode_tok_s(one) if decode_tok_s(one) else 0.0
        print(f"{r['streams']:<8} {r['aggregate_tok_s']:>12.1f} {agg:>7.2f}x {decode_tok_s(r):>12.1f} {dec:>7.2f}x "
              f"{r['ttft_p50_ms']:>8.1f}ms {r['ttft_p99_ms']:>8.1f}ms {r['itl_p50_ms']:>8.1f}ms "
              f"{r['itl_p99_ms']:>8.1f}ms {r['mismatches']:>9}")
        return
    ratios = {}
    for r, one in paired(runs):
        if r["streams"] > 1 and one["streams"] == 1:
            ratios.setdefault(r["streams"], []).append(
                (r["aggregate_tok_s"] / one["aggregate_tok_s"], decode_tok_s(r) / decode_tok_s(one)))
    for n, rs in sorted(ratios.items()):
        if len(rs) > 1:
            print(f"median of {len(rs)} pairs at {n} streams: aggregate {statistics.median(a for a, _ in rs):.2f}x, "
                  f"decode {statistics.median(d for _, d in rs):.2f}x one stream")


if __name__ == "__main__":
    main()
