#!/usr/bin/env python3
"""nmajor's call (bench/nmajor/call.sh) as tables: `python3 bench/nmajor/table.py DIR` (DIR: the call's r/).

1. every `solder bench` record: median, fastest and slowest replay, and the nvidia-smi samples of r/clocks.csv
   inside its timed span (SM clock, power, clock-event reasons: 0x4 is the software power cap);
2. per tag over the rounds: the median of the rounds' medians and the fastest replay;
3. the peers (bench/census/peers.py: CUDA-graph median, max error against float64);
4. ncu (r/ncu/TAG.csv): duration, SM clock, tensor pipe, L2 and DRAM traffic, bank conflicts, top stalls, side by side.
"""
import csv
import datetime
import json
import os
import statistics
import sys


def clocks(path):
    out = []
    for line in open(path):
        if line.startswith("#"):
            continue
        p = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
            out.append((t, int(p[1].split()[0]), float(p[3].split()[0]), p[5][-2:]))
        except (ValueError, IndexError):
            continue
    return out


NCU = [("gpu__time_duration.sum", "duration ns"), ("sm__cycles_elapsed.avg.per_second", "SM clock Hz"),
       ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe % active"),
       ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue active %"),
       ("lts__t_bytes.sum", "L2 bytes"), ("lts__t_sector_hit_rate.pct", "L2 hit %"),
       ("lts__t_sectors_srcunit_tex_op_read.sum", "L2 read sectors from SMs"),
       ("dram__bytes_read.sum", "DRAM read bytes"), ("dram__bytes_write.sum", "DRAM write bytes"),
       ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "smem bank conflicts (LSU)"),
       ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smem wavefronts (LSU)"),
       ("l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed", "smem bank reads %"),
       ("launch__registers_per_thread", "registers")]


def main():
    d = sys.argv[1]
    clk = clocks(os.path.join(d, "clocks.csv"))
    records = [json.loads(l) for l in open(os.path.join(d, "solder.jsonl"))]
    print("| round | tag | median µs | fastest | slowest | SM MHz in span | W in span | reasons |")
    print("|---|---|---|---|---|---|---|---|")
    for r in records:
        a, b = r["timed_span_ms"]
        s = [c for c in clk if a / 1000 - 0.05 <= c[0] <= b / 1000 + 0.05]
        print(f"| {r['round']} | {r['tag']} | {r['median_us']:.2f} | {r['min_us']:.2f} | {r['max_us']:.2f} | "
              f"{' '.join(str(c[1]) for c in s)} | {' '.join(str(round(c[2])) for c in s)} | {' '.join(sorted(set('0x' + c[3] for c in s)))} |")
    print("\n| tag | rounds' medians | median of them | fastest replay |")
    print("|---|---|---|---|")
    for tag in dict.fromkeys(r["tag"] for r in records):
        rs = [r for r in records if r["tag"] == tag]
        medians = ", ".join("%.2f" % r["median_us"] for r in rs)
        print(f"| {tag} | {medians} | {statistics.median(r['median_us'] for r in rs):.2f} | "
              f"{min(r['min_us'] for r in rs):.2f} |")
    peers = os.path.join(d, "peers.jsonl")
    if os.path.exists(peers):
        print("\n| cell | peer | median µs | max rel. error |")
        print("|---|---|---|---|")
        for l in open(peers):
            p = json.loads(l)
            print(f"| {p['cell']} | {p['peer']} | {p['median_us']:.2f} | {p['max_rel_err']:.1e} |")
    tags = [t for t in ("nn", "nt", "bmm", "bmm-main") if os.path.exists(os.path.join(d, "ncu", t + ".csv"))]
    if tags:
        cols = {}
        for t in tags:
            rows = list(csv.reader(open(os.path.join(d, "ncu", t + ".csv"))))
            h = [i for i, r in enumerate(rows) if r and r[0] == "ID"][0]
            cols[t] = dict(zip(rows[h], rows[h + 2]))
        print("\n| ncu | " + " | ".join(tags) + " |")
        print("|---|" + "---|" * len(tags))
        for key, name in NCU:
            print(f"| {name} | " + " | ".join(cols[t].get(key, "-") for t in tags) + " |")
        for t in tags:
            stalls = sorted(((float(v.replace(",", "")), k[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")])
                             for k, v in cols[t].items()
                             if k.startswith("smsp__average_warps_issue_stalled_") and k.endswith("_per_issue_active.ratio")), reverse=True)
            print(f"\n{t}: stalls per issue " + ", ".join(f"{n} {v}" for v, n in stalls[:6]))


if __name__ == "__main__":
    main()
