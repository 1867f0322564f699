"""The A/B call driver's table (bench/merged_call.sh): each Solder record of DIR/solder*.jsonl against the
peers of DIR/peers.jsonl measured in the same call and the same round.

Usage: python3 bench/merged_table.py DIR

A record from solder-<tag>.jsonl is labelled with its tag (a knob forced for that spot line). Records carry
"round": K (ROUNDS=N; records without one, from calls before rounds, are round 1), "timed_span_ms" (solder
bench and peers.py: when the timed replays ran) and "span" (the driver's step), joined with DIR/clocks.csv
for the median SM clock of the samples in the timed replays (else the step) with the GPU not idle. Two tables:
  - per round: Solder's median and fastest replay (min_us) and SM clock, the cell's target peer in the same
    round (median, fastest replay, clock), Solder / target, the best verified peer and Solder / best;
  - over the rounds: the median of the rounds' medians, the fastest replay of all rounds, the median of
    the rounds' clocks, for Solder and the target peer; the ratio of the medians and of the fastest
    replays, the target and whether the median ratio meets it.
The target peer: attention cells from bench/attention/status.py (cuDNN SDPA for vanilla / gqa / causal at
<= 1.0x, FlexAttention for the others at <= 0.83x); any other suite's target is its best verified peer of
the same round at <= 1.0x. A record that matches no suite case is listed by program and dims."""
import datetime
import glob
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "attention"))   # after bench/: it has a report.py of its own
import report  # noqa: E402
import suites  # noqa: E402
from status import TARGET_PEER, TARGET_RATIO  # noqa: E402  (attention's target peers; one place)

CASES = suites.cases("all")


def _stamp(text):
    """nvidia-smi's time stamp (local time of the device) as seconds, read as if it were UTC."""
    day, clock = text.strip().split(" ")
    whole, _, frac = clock.partition(".")
    t = datetime.datetime.strptime(f"{day} {whole}", "%Y/%m/%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + (float("0." + frac) if frac else 0.0)


def load_clocks(path):
    """[(epoch seconds, SM MHz, idle)] of the driver's clocks.csv: nvidia-smi's samples (timestamp,
    clocks.sm, clocks.mem, power.draw, temperature.gpu, clocks_event_reasons.active); its first line,
    '# ref EPOCH LOCAL-DATE LOCAL-TIME FIELDS', maps the local stamps to epoch seconds (without it they are
    taken as the reading machine's local time). idle: the reasons' bit 0 (GPU idle) is set."""
    rows, offset = [], None
    if not os.path.exists(path):
        return rows
    for line in open(path):
        if line.startswith("# ref "):
            f = line.split()
            offset = float(f[2]) - _stamp(f"{f[3]} {f[4]}")
            continue
        f = [x.strip() for x in line.split(",")]
        if len(f) < 6:
            continue
        try:
            if offset is not None:
                t = _stamp(f[0]) + offset
            else:
                t = datetime.datetime.strptime(f[0][:26], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            sm = float(f[1].split()[0])
        except ValueError:
            continue
        try:
            idle = bool(int(f[5], 16) & 1)
        except ValueError:
            idle = False
        rows.append((t, sm, idle))
    return rows


def span_of(rec):
    """(start, end) in epoch seconds of a record's timed replays (timed_span_ms: `solder bench --json`,
    peers.py), else of its step (span: the driver's), else None."""
    if rec.get("timed_span_ms"):
        return [x / 1e3 for x in rec["timed_span_ms"]]
    return rec.get("span")


def clock_in(clocks, rec):
    """The median SM clock (MHz) of the busy samples in a record's timed replays (else its step)."""
    span = span_of(rec)
    if not clocks or not span:
        return None
    sm = [c[1] for c in clocks if span[0] <= c[0] <= span[1] and not c[2]]
    return statistics.median(sm) if sm else None


def case_of(rec):
    found = report.match_case(rec, CASES)
    return found[0] if len(found) == 1 else None


def load(d):
    """(Solder rows, {(case id, round): {peer: [records]}}, clocks) of a call's folder."""
    clocks = load_clocks(os.path.join(d, "clocks.csv"))
    peers = {}
    path = os.path.join(d, "peers.jsonl")
    for r in (report.read_jsonl(path) if os.path.exists(path) else []):
        if r.get("record", "peer") != "peer" or r.get("status", "ok") != "ok" or not r.get("median_us"):
            continue
        if not r.get("verified", True):
            continue
        r["clock"] = clock_in(clocks, r)
        peers.setdefault((r.get("case"), r.get("round", 1)), {}).setdefault(r["peer"], []).append(r)
    rows = []
    for path in sorted(glob.glob(os.path.join(d, "solder*.jsonl"))):
        stem = os.path.basename(path)[:-len(".jsonl")]
        tag = stem[len("solder-"):] if stem.startswith("solder-") else "-"
        for r in report.read_jsonl(path):
            if not isinstance(r.get("median_us"), (int, float)):
                continue
            c = case_of(r)
            rows.append({"case": c, "label": c.id if c else f"{r.get('program')} {r.get('dims')}", "tag": tag,
                         "round": r.get("round", 1), "rec": r, "clock": clock_in(clocks, r)})
    return rows, peers, clocks


def summary(recs):
    """(median, fastest replay, median clock) of one peer's records in one round."""
    return (statistics.median(q["median_us"] for q in recs), min(q.get("min_us") or q["median_us"] for q in recs),
            _median([q["clock"] for q in recs]))


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def target_of(case, same_round):
    """(peer name, ratio to meet) of a cell; same_round: {peer: [records]} of its round."""
    if case is not None and case.suite == "attention":
        name = TARGET_PEER.get(case.workload, "flex")
        return name, TARGET_RATIO[name]
    if not same_round:
        return None, 1.0
    return min(same_round, key=lambda p: summary(same_round[p])[0]), 1.0


def f(x, fmt="%.2f"):
    return fmt % x if x is not None else "-"


def table(d):
    rows, peers, clocks = load(d)
    out = []
    if os.path.exists(os.path.join(d, "device.txt")):
        out.append(f"device: {open(os.path.join(d, 'device.txt')).read().strip()}\n")
    out.append("## per round (µs per call: median of the replays, and the fastest replay; SM clock: the median "
               "of the busy samples in the span, MHz)\n")
    out.append("| case | tag | round | Solder µs | fastest | SM MHz | target peer | peer µs | fastest | SM MHz | "
               "Solder / target | best peer | best µs | Solder / best |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    cells = {}
    first = {}
    for i, row in enumerate(rows):
        first.setdefault(row["label"], i)
    # the cells in the order of their first record (the spots file's), each cell's tags and rounds together
    for row in sorted(rows, key=lambda x: (first[x["label"]], x["tag"] != "-", x["tag"], x["round"])):
        r, cid = row["rec"], row["case"].id if row["case"] else None
        same = peers.get((cid, row["round"]), {})
        name, need = target_of(row["case"], same)
        tgt = summary(same[name]) if name in same else None
        best = min(same, key=lambda p: summary(same[p])[0]) if same else None
        bs = summary(same[best]) if best else None
        us, fastest = r["median_us"], r.get("min_us")
        out.append(f"| {row['label']} | {row['tag']} | {row['round']} | {f(us)} | {f(fastest)} | "
                   f"{f(row['clock'], '%.0f')} | {name or '-'} | {f(tgt and tgt[0])} | {f(tgt and tgt[1])} | "
                   f"{f(tgt and tgt[2], '%.0f')} | {f(tgt and us / tgt[0], '%.3f')} | {best or '-'} | "
                   f"{f(bs and bs[0])} | {f(bs and us / bs[0], '%.3f')} |")
        cell = cells.setdefault((row["label"], row["tag"]), {"case": row["case"], "name": name, "need": need,
                                                              "rounds": {}, "peer": {}, "best": {}})
        cell["rounds"].setdefault(row["round"], []).append((us, fastest or us, row["clock"], r.get("kernels")))
        if tgt:
            cell["peer"][row["round"]] = tgt
        if bs:
            cell["best"][row["round"]] = (best, bs[0])

    out.append("\n## over the rounds (the median of the rounds' medians; the fastest replay of all rounds)\n")
    out.append("| case | tag | rounds | kernels | Solder µs | fastest | SM MHz | target peer | peer µs | fastest | "
               "SM MHz | Solder / target | fastest / fastest | target | met | best peer µs | Solder / best |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    met = total = best_met = best_total = 0
    for (label, tag), c in cells.items():
        per = {k: (statistics.median(x[0] for x in v), min(x[1] for x in v), _median([x[2] for x in v]))
               for k, v in c["rounds"].items()}
        us = statistics.median(p[0] for p in per.values())
        fastest = min(p[1] for p in per.values())
        clock = _median([p[2] for p in per.values()])
        kernels = next((x[3] for v in c["rounds"].values() for x in v if x[3] is not None), "-")
        pv = list(c["peer"].values())
        p_us = statistics.median(p[0] for p in pv) if pv else None
        p_fast = min(p[1] for p in pv) if pv else None
        p_clock = _median([p[2] for p in pv])
        ratio = us / p_us if p_us else None
        ratio_fast = fastest / p_fast if p_fast else None
        ok = None
        if ratio is not None:
            ok = ratio <= c["need"]
            total += 1
            met += ok
        bv = [b[1] for b in c["best"].values()]
        b_us = statistics.median(bv) if bv else None
        if b_us:
            best_total += 1
            best_met += us / b_us <= 1.0
        need = f"≤ {c['need']:.2f}× {c['name']}" if c["name"] else "-"
        out.append(f"| {label} | {tag} | {','.join(str(k) for k in sorted(per))} | {kernels} | {f(us)} | "
                   f"{f(fastest)} | {f(clock, '%.0f')} | {c['name'] or '-'} | {f(p_us)} | {f(p_fast)} | "
                   f"{f(p_clock, '%.0f')} | {f(ratio, '%.3f')} | {f(ratio_fast, '%.3f')} | {need} | "
                   f"{'-' if ok is None else ('yes' if ok else 'no')} | {f(b_us)} | "
                   f"{f(b_us and us / b_us, '%.3f')} |")
    out.append(f"\ncells meeting their target in this call (median of the rounds' medians): {met} of {total}")
    out.append(f"cells at or under 1.0x the best peer measured here: {best_met} of {best_total}")
    if not clocks:
        out.append("(no clocks.csv: no SM clock)")
    return "\n".join(out)


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(table(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
