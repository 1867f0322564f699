"""The summary table of a rounds call (bench/quant_lrb/device.sh, bench/lrb_model/device.sh,
bench/quant_lrb3/device.sh):
python3 summary.py DIR [LABEL] (DIR holds rounds.jsonl, clocks.csv, verify.txt and the ncu CSVs; LABEL
names the call in the first line, default quant-lrb)."""
import csv
import datetime
import io
import json
import os
import statistics
import sys


def load_jsonl(path):
    out = []
    if os.path.exists(path):
        for line in open(path):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def load_clocks(path):
    """(epoch seconds, SM MHz, power W, throttle reasons) per sample of nvidia-smi's log."""
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 6:
            continue
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            sm = float(f[1].split()[0])
            power = float(f[3].split()[0])
            rows.append((t, sm, power, f[5]))
        except ValueError:
            continue
    return rows


def clock_during(clocks, start, end):
    s = [c for c in clocks if start <= c[0] <= end]
    if not s:
        return ""
    sm = [c[1] for c in s]
    pw = [c[2] for c in s]
    reasons = sorted({c[3] for c in s if c[3] not in ("0x0000000000000000", "0x0000000000000001")})
    return (f"SM {min(sm):.0f}-{max(sm):.0f} MHz (mean {statistics.mean(sm):.0f}), {statistics.mean(pw):.0f} W"
            + (f", reasons {'/'.join(reasons)}" if reasons else ""))


def ncu_rows(path):
    if not os.path.exists(path):
        return []
    text = open(path).read()
    i = text.find('"ID"')
    if i < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[i:])))
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[2:] if len(r) == len(head)]


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return float("nan")


def main():
    d = sys.argv[1]
    label = sys.argv[2] if len(sys.argv) > 2 else "quant-lrb"
    recs = load_jsonl(os.path.join(d, "rounds.jsonl"))
    clocks = load_clocks(os.path.join(d, "clocks.csv"))
    print(f"# {label} call: {open(os.path.join(d, 'device.txt')).read().strip() if os.path.exists(os.path.join(d, 'device.txt')) else ''}")
    vpath = os.path.join(d, "verify.txt")
    if os.path.exists(vpath):
        v = open(vpath).read().splitlines()
        bad = [x for x in v if ": verified" not in x]
        print(f"\n## verify (solder run --backend cuda, float64 reference): {len(v) - len(bad)} of {len(v)} verified")
        for x in bad:
            print("   " + x[:200])

    print("\n## every timing, in call order (µs: median, min, max of the replays; clocks during it)")
    for r in recs:
        if r.get("record") not in ("solder", "peer"):
            continue
        who = r["variant"] if r["record"] == "solder" else "torch.compile"
        if "median_us" in r:
            spread = (r["median_us"] - r["min_us"]) / r["median_us"] * 100
            print(f"r{r['round']} {r['cell']:9} {who:16} {r['median_us']:9.2f} {r['min_us']:9.2f} {r['max_us']:9.2f}  "
                  f"(min {spread:4.1f} % under)  {clock_during(clocks, r['start'], r['end'])}")
        else:
            print(f"r{r['round']} {r['cell']:9} {who:16} ERROR {str(r.get('error', ''))[-160:]}")

    print("\n## per cell: median of the rounds' medians (each round's value), against torch.compile (default mode)")
    cells = []
    for r in recs:
        if r.get("record") in ("solder", "peer") and r["cell"] not in cells:
            cells.append(r["cell"])
    print(f"{'cell':9} {'variant':16} {'rounds (µs)':34} {'median':>8} {'min':>8}  {'/peer':>7} {'per round':>22}")
    for cell in cells:
        peer = [r for r in recs if r.get("record") == "peer" and r["cell"] == cell and "median_us" in r]
        pm = statistics.median([r["median_us"] for r in peer]) if peer else None
        variants = []
        for r in recs:
            if r.get("record") == "solder" and r["cell"] == cell and r["variant"] not in variants:
                variants.append(r["variant"])
        for var in variants + (["torch.compile"] if peer else []):
            rs = peer if var == "torch.compile" else [r for r in recs if r.get("record") == "solder" and r["cell"] == cell
                                                       and r["variant"] == var and "median_us" in r]
            if not rs:
                print(f"{cell:9} {var:16} no result")
                continue
            meds = [r["median_us"] for r in rs]
            mins = [r["min_us"] for r in rs]
            m = statistics.median(meds)
            ratio = f"{m / pm:7.3f}" if pm and var != "torch.compile" else "       "
            per_round = ""
            if pm and var != "torch.compile":
                by_round = {r["round"]: r["median_us"] for r in peer}
                per_round = " ".join(f"{r['median_us'] / by_round[r['round']]:.3f}" for r in rs if r["round"] in by_round)
            print(f"{cell:9} {var:16} {' '.join(f'{x:.2f}' for x in meds):34} {m:8.2f} {min(mins):8.2f}  {ratio} {per_round:>22}")

    kern = [r for r in recs if r.get("record") == "kernel"]
    if kern:
        print("\n## the peers' kernels (torch.profiler, CUDA-graph replays; µs per launch)")
        for r in kern:
            ds = r["durs_us"]
            print(f"{r['profile']:16} {r['kernel'][:84]:84} grid {r['grid']} block {r['block']} regs {r['registers']} n {r['launches']} "
                  f"median {statistics.median(ds) if ds else 0:.2f} min {min(ds) if ds else 0:.2f} max {max(ds) if ds else 0:.2f}")

    parts = [r for r in recs if r.get("record") == "torch-parts"]
    if parts:
        print("\n## the peer's parts, each alone (bench/lrb_dw_torch_parts.py)")
        for r in parts:
            for line in r.get("output", "").splitlines():
                if line.startswith("torch part"):
                    print(line)

    for name in sorted(os.listdir(d)):
        if not (name.startswith("ncu-") and name.endswith(".csv")):
            continue
        rows = ncu_rows(os.path.join(d, name))
        if not rows:
            continue
        print(f"\n## {name} (--clock-control none, no cache flush)")
        by = {}
        for r in rows:
            by.setdefault(r.get("Kernel Name", "?"), []).append(r)
        for k, rs in by.items():
            t = [num(r.get("gpu__time_duration.sum")) / 1e3 for r in rs]
            clk = [num(r.get("sm__cycles_elapsed.avg.per_second")) for r in rs]
            dram = [num(r.get("dram__bytes_read.sum")) for r in rs]
            l2 = [num(r.get("lts__t_bytes.sum")) for r in rs]
            unit = rs[0].get("sm__cycles_elapsed.avg.per_second", "")
            print(f"{k[:40]:40} n {len(rs)} grid {rs[0].get('launch__grid_size', '?')} µs " + " ".join(f"{x:.2f}" for x in t)
                  + f" | SM clock {' '.join(f'{x:.3g}' for x in clk)} | DRAM read MB {statistics.median(dram) / 1e6:.1f}"
                  + f" | L2 MB {statistics.median(l2) / 1e6:.1f} | DRAM % {rs[0].get('dram__throughput.avg.pct_of_peak_sustained_elapsed', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
