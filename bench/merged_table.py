"""An integrator's merged-call table: each Solder record of DIR/solder*.jsonl against the best peer of
DIR/peers.jsonl measured in the same call (matched by program and dims). A record from solder-<tag>.jsonl
is labelled with its tag (a knob forced for that spot line, see bench/merged_call.sh).
Usage: python3 bench/merged_table.py DIR"""
import glob
import os
import sys

from report import read_jsonl


def main(d):
    peers = [r for r in read_jsonl(os.path.join(d, "peers.jsonl")) if r.get("median_us")] \
        if os.path.exists(os.path.join(d, "peers.jsonl")) else []

    def best(r):
        found = [q for q in peers if q.get("program") == r.get("program")
                 and all(r.get("dims", {}).get(k) == v for k, v in q.get("dims", {}).items())]
        return min(found, key=lambda q: q["median_us"]) if found else None

    print("| case | Solder µs | kernels | best peer | peer µs | ratio |")
    print("|---|---|---|---|---|---|")
    met = total = 0
    for path in sorted(glob.glob(os.path.join(d, "solder*.jsonl"))):
        stem = os.path.basename(path)[:-len(".jsonl")]
        tag = f" ({stem[len('solder-'):]})" if stem.startswith("solder-") else ""
        for r in read_jsonl(path):
            q = best(r)
            us = r.get("median_us")
            ratio = us / q["median_us"] if us and q else None
            if ratio:
                total += 1
                met += ratio <= 1.0
            case = (q or {}).get("case") or f"{r.get('program')} {r.get('dims')}"
            print(f"| {case}{tag} | {('%.2f' % us) if us else '-'} | {r.get('kernels', '-')} | "
                  f"{(q or {}).get('peer', '-')} | {('%.2f' % q['median_us']) if q else '-'} | "
                  f"{('%.3f' % ratio) if ratio else '-'} |")
    print(f"\ncells at or under 1.0x the best peer measured here: {met} of {total}")


if __name__ == "__main__":
    main(sys.argv[1])
