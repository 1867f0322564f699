#!/usr/bin/env python3
"""suite15's table (issue 15: where every target stands on one device) from the raw records of one call of
bench/suite15/call.sh, unpacked into DIR:

    DIR/mc1/r/   merged_call.sh's records of the suites' cells (solder.jsonl, peers.jsonl, clocks.csv, steps.tsv)
    DIR/skeleton/  the GEMM skeleton alone at 8192^3 (solder.jsonl, peers.jsonl with the ceilings, clocks.csv)
    DIR/mc2/r/   merged_call.sh's records of evoformer

    python3 bench/suite15/table.py DIR > section.md

Per cell: the floor (max(floor bytes / copy rate, FLOPs / matrix rate), with the copy and matmul ceilings
measured in the same call by skeleton_peers.py; bf16 rate for every GEMM, fp8 for quant_gemm), Solder's
median (`solder bench`, CUDA-graph replays) and the median SM clock of its timed replays, each peer's median
(bench/peers.py, verified against float64; an unverified peer is shown with ✗ and never compared), the best
verified peer, Solder / best, Solder / floor, issue 15's target and whether this call meets it. Issue 15
states its targets for the H100: a cell that meets it here is "met here (H100: not claimed)". The misses are
then ranked by their absolute gap: Solder's time minus the time that would meet the target.
"""
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import merged_table  # noqa: E402
import report  # noqa: E402
import suites  # noqa: E402

PEER_COLUMNS = ("eager", "compile", "flex", "sdpa_cudnn")
# issue 15's targets: (peer the ratio is to, "best" = the best verified peer; most Solder / peer allowed)
TARGETS = {"ffn": ("best", 1.0), "gated_ffn": ("best", 1.0), "quant_gemm": ("best", 1.0),
           "moe_routing": ("best", 1.0), "rmsnorm_gemm": ("best", 1.0), "linear_relu_backward": ("compile", 1.0),
           "nerf_mlp": ("compile", 1.0), "conv_chain": ("compile", 1.0), "evoformer": ("flex", 1.0)}
ORDER = ("ffn", "gated_ffn", "quant_gemm", "moe_routing", "rmsnorm_gemm", "linear_relu_backward", "nerf_mlp",
         "conv_chain", "evoformer")


def read(path):
    return report.read_jsonl(path) if os.path.exists(path) else []


def load_part(d, cases):
    """({case id: (Solder record, SM MHz)}, {case id: {peer: record}}) of one merged_call.sh folder."""
    clocks = merged_table.load_clocks(os.path.join(d, "clocks.csv"))
    solder, taken = {}, set()
    for r in read(os.path.join(d, "solder.jsonl")):
        if not isinstance(r.get("median_us"), (int, float)):
            continue
        # S4 and G8 share a shape: records come in the spots' (= the suite's) order, each takes the first free case
        found = [c for c in report.match_case(r, cases) if c.id not in taken]
        if found:
            taken.add(found[0].id)
            solder[found[0].id] = (r, merged_table.clock_in(clocks, r))
    peers = {}
    # step.jsonl: a peers step cut by call.sh's timeout leaves its finished records there, not in peers.jsonl
    for r in read(os.path.join(d, "step.jsonl")) + read(os.path.join(d, "peers.jsonl")):
        if r.get("record") == "peer" and r.get("status") == "ok" and r.get("median_us"):
            r["clock"] = merged_table.clock_in(clocks, r)
            peers.setdefault(r["case"], {})[r["peer"]] = r
    return solder, peers


def fmt(x, f="%.2f"):
    return f % x if x is not None else "–"


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def verdict(ok):
    return "–" if ok is None else ("met here (H100: not claimed)" if ok else "**missed**")


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    d = argv[0]
    cases = [c for c in suites.cases("all") if c.workload in TARGETS]
    solder, peers = {}, {}
    for part in ("mc1/r", "mc2/r"):
        s, p = load_part(os.path.join(d, part), cases)
        solder.update(s)
        peers.update(p)
    skel_clocks = merged_table.load_clocks(os.path.join(d, "skeleton", "clocks.csv"))
    skel_peers = read(os.path.join(d, "skeleton", "peers.jsonl"))
    ceil = next((r for r in skel_peers if r.get("record") == "ceiling" and "error" not in r), None)
    ceilings = {k: ceil[k] for k in ("copy_TBps", "bf16_mm_TFLOPs", "fp8_mm_TFLOPs")} if ceil else None
    device = next((r["rec"]["device"] for r in [{"rec": v[0]} for v in solder.values()] if r["rec"].get("device")), "?")
    commit = next((v[0].get("commit") for v in solder.values() if v[0].get("commit")), "?")
    date = next((v[0].get("date") for v in solder.values() if v[0].get("date")), "?")
    modes = sorted({f"{p['peer']} {p['compile_mode']}" for q in peers.values() for p in q.values()
                    if p.get("compile_mode")})
    out = [f"Device {device}, {date}, Solder at {commit}; peers on torch "
           f"{next((p.get('torch') for q in peers.values() for p in q.values()), '?')} (compile modes: "
           f"{', '.join(modes) or '–'}). One round; every peer verified against float64 (✗: not verified, never "
           "compared); SM MHz: the median clock of Solder's timed replays."]
    if ceilings:
        out.append(f"Ceilings of this call (skeleton_peers.py): copy {ceilings['copy_TBps']:.2f} TB/s, bf16 "
                   f"{ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s, fp8 {ceilings['fp8_mm_TFLOPs']:.0f} TFLOP/s "
                   "(8192³, cuBLAS / `_scaled_mm`): the floors below use them.")
    else:
        out.append("No ceilings came back: floors at suites.py's H100 reference ceilings.")
    out.append("")
    misses, met_count, all_count, by_wl = [], {}, {}, {}
    out.append("| case | floor µs | Solder µs | SM MHz | eager | compile | flex | cuDNN | best peer | "
               "Solder / best | Solder / floor | target | this call |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for wl in ORDER:
        for c in [c for c in cases if c.workload == wl]:
            s, clock = solder.get(c.id, (None, None))
            p = peers.get(c.id, {})
            ok_peers = {k: v for k, v in p.items() if v.get("verified", True)}
            best = min(ok_peers, key=lambda k: ok_peers[k]["median_us"]) if ok_peers else None
            floor = suites.floor_us(c, ceilings)
            us = s["median_us"] if s else None
            cols = []
            for k in PEER_COLUMNS:
                if k not in p:
                    cols.append("–")
                else:
                    cols.append(fmt(p[k]["median_us"]) + ("" if k in ok_peers else " ✗"))
            who, need = TARGETS[wl]
            tgt = best if who == "best" else (who if who in ok_peers else None)
            ok = None
            if us is not None and tgt:
                ok = us / ok_peers[tgt]["median_us"] <= need
                met_count[wl] = met_count.get(wl, 0) + ok
                all_count[wl] = all_count.get(wl, 0) + 1
                if not ok:
                    misses.append((us - need * ok_peers[tgt]["median_us"], c.id, us, tgt,
                                   ok_peers[tgt]["median_us"], us / ok_peers[tgt]["median_us"]))
            if us is not None and best:
                by_wl.setdefault(wl, []).append(us / ok_peers[best]["median_us"])
            target = f"≤ {need:.1f}× {'best peer' if who == 'best' else who}"
            out.append(f"| {c.id} | {fmt(floor)} | {fmt(us)} | {fmt(clock, '%.0f')} | {' | '.join(cols)} | "
                       f"{best or '–'} | {fmt(us and best and us / ok_peers[best]['median_us'], '%.3f')} | "
                       f"{fmt(us and us / floor, '%.2f')} | {target} | {verdict(ok)} |")
    # the GEMM skeleton alone
    out.append("")
    out.append("**The GEMM skeleton alone, 8192³** (`solder bench` of `bench/programs/bf16_rowscale_gemm.sol` / "
               "`fp8_rowscale_gemm.sol`: the generated program, a per-row scale after the dot; the peers by "
               "`skeleton_peers.py`, CUDA-graph replays):\n")
    out.append("| GEMM | Solder µs | TFLOP/s | SM MHz | peer | peer µs | TFLOP/s | SM MHz | Solder rate / peer rate | "
               "target | this call |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    sk = {}
    for r in read(os.path.join(d, "skeleton", "solder.jsonl")):
        if isinstance(r.get("median_us"), (int, float)):
            sk["fp8" if "fp8" in r.get("program", "") else "bf16"] = r
    sp = {r["peer"]: r for r in skel_peers if r.get("record") == "skeleton_peer" and r.get("status") == "ok"}
    flops = 2.0 * 8192 ** 3
    for kind, peer_names in (("bf16", ("cublas_bf16",)), ("fp8", ("scaled_mm_rowwise", "scaled_mm_tensorwise"))):
        r = sk.get(kind)
        us = r["median_us"] if r else None
        clock = merged_table.clock_in(skel_clocks, r) if r else None
        for i, name in enumerate(peer_names):
            q = sp.get(name)
            pu = q["median_us"] if q else None
            rate = (pu / us) if (us and pu) else None     # Solder's TFLOP/s over the peer's
            primary = i == 0
            ok = (rate >= 0.9) if (rate is not None and primary) else None
            if ok is False:
                misses.append((us - pu / 0.9, f"skeleton {kind} 8192³", us, name, pu, us / pu))
            out.append(f"| {kind} | {fmt(us)} | {fmt(us and flops / us / 1e6, '%.0f')} | {fmt(clock, '%.0f')} | {name} | "
                       f"{fmt(pu)} | {fmt(pu and flops / pu / 1e6, '%.0f')} | "
                       f"{fmt(q and merged_table.clock_in(skel_clocks, q), '%.0f')} | {fmt(rate, '%.3f')} | "
                       f"{'≥ 0.9× ' + name if primary else '(shown)'} | {verdict(ok) if primary else '–'} |")
    out.append("")
    out.append("| suite | cells met here / timed | geomean Solder / best peer |")
    out.append("|---|---|---|")
    for wl in ORDER:
        if wl in all_count:
            out.append(f"| {wl} | {met_count[wl]} / {all_count[wl]} | {fmt(geomean(by_wl.get(wl, [])), '%.3f')} |")
    out.append("")
    out.append("**Misses ranked by absolute gap** (Solder µs − the time that meets the target):\n")
    out.append("| rank | cell | Solder µs | target peer | peer µs | Solder / peer | gap µs |")
    out.append("|---|---|---|---|---|---|---|")
    for i, (gap, cid, us, tgt, pu, ratio) in enumerate(sorted(misses, reverse=True), 1):
        out.append(f"| {i} | {cid} | {us:.2f} | {tgt} | {pu:.2f} | {ratio:.3f} | {gap:.2f} |")
    missing = [c.id for c in cases if c.id not in solder]
    if missing:
        out.append(f"\nNo Solder record: {', '.join(missing)}")
    no_peer = [c.id for c in cases if c.id not in peers]
    if no_peer:
        out.append(f"No peer record: {', '.join(no_peer)}")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
