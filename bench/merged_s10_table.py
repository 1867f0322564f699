"""The tenth session's merged-call table: each Solder record of DIR/solder*.jsonl / chains.jsonl against
the best peer of DIR/peers.jsonl measured in the same call (by program and dims).
Usage: python3 bench/merged_s10_table.py DIR"""
import os
import sys

from report import read_jsonl


def rows(d, name):
    p = os.path.join(d, name)
    return read_jsonl(p) if os.path.exists(p) else []


def main(d):
    peers = [r for r in rows(d, "peers.jsonl") if r.get("median_us")]

    def best(r):
        found = [q for q in peers if q.get("program") == r.get("program")
                 and all(r.get("dims", {}).get(k) == v for k, v in q.get("dims", {}).items())]
        return min(found, key=lambda q: q["median_us"]) if found else None

    print("| case | Solder µs | kernels | best peer | peer µs | ratio |")
    print("|---|---|---|---|---|---|")
    met = total = 0
    for name in ("solder.jsonl", "solder-q3-256.jsonl", "chains.jsonl"):
        for r in rows(d, name):
            q = best(r)
            us = r.get("median_us")
            ratio = us / q["median_us"] if us and q else None
            if ratio:
                total += 1
                met += ratio <= 1.0
            tag = " (128x256 forced)" if name == "solder-q3-256.jsonl" else ""
            case = (q or {}).get("case") or f"{r.get('program')} {r.get('dims')}"
            print(f"| {case}{tag} | {('%.2f' % us) if us else '-'} | {r.get('kernels', '-')} | {(q or {}).get('peer', '-')} | "
                  f"{('%.2f' % q['median_us']) if q else '-'} | {('%.3f' % ratio) if ratio else '-'} |")
    print(f"\ncells at or under 1.0x the best peer measured here: {met} of {total}")


if __name__ == "__main__":
    main(sys.argv[1])
