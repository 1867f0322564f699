#!/usr/bin/env python3
"""Merge Solder's benchmark results with the peers' into markdown tables and PNG plots.

    python3 bench/report.py --solder SOLDER.jsonl [...] --peers PEERS.jsonl [...] \
        [--out-dir bench/results/h100] [--suite all] [--no-plots] [--small]

Inputs
  --solder  JSON lines from `build/solder bench FILE --json` (one object per run; fields program,
            dims, median_us, min_us, max_us, device, floor_us, tflops, gbs). Read tolerantly: other
            fields are ignored, lines that are not JSON are skipped, `dims` may be an object or a
            "NAME=VALUE" list, a `case` / `id` field naming a bench/suites.py case wins over matching
            by program and dims.
  --peers   JSON lines from bench/peers.py ("peer" and "ceiling" records).
  When a (case, implementation) appears more than once, the last successful record wins.

Outputs, per suite, in --out-dir: SUITE.md (one table: case, floor, Solder µs and its ratio to the
floor, each peer's µs with the ratio Solder/peer, best verified peer) and SUITE.png (bars per case,
log µs, floor marked); each stamped with device, date and git commit. Only verified peers (output
within tolerance of the float64 reference) enter ratios; others are shown as ✗.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import suites  # noqa: E402

PEER_ORDER = ["eager", "compile", "sdpa_flash", "sdpa_cudnn", "flex", "torch_var", "eager_sdpa"]
PEER_LABEL = {"eager": "torch eager", "compile": "torch.compile", "sdpa_flash": "SDPA flash",
              "sdpa_cudnn": "SDPA cuDNN", "flex": "FlexAttention", "torch_var": "torch.var",
              "eager_sdpa": "eager + SDPA"}


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------

def read_jsonl(path):
    """Objects of a JSON lines file (a JSON array or a single object are accepted too)."""
    with open(path) as f:
        text = f.read()
    try:
        whole = json.loads(text)
        return whole if isinstance(whole, list) else [whole]
    except ValueError:
        pass
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            print(f"warning: {path}:{n}: not JSON, skipped", file=sys.stderr)
    return out


def _num(rec, *keys):
    for k in keys:
        v = rec.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                pass
    return None


def _dims_of(rec):
    d = rec.get("dims") or rec.get("sizes") or {}
    if isinstance(d, str):
        d = dict(re.findall(r"([A-Za-z_]\w*)\s*=\s*(-?\d+)", d))
    if isinstance(d, list):
        d = dict(re.findall(r"([A-Za-z_]\w*)\s*=\s*(-?\d+)", " ".join(map(str, d))))
    out = {}
    for k, v in (d or {}).items():
        try:
            out[str(k)] = int(v)
        except (TypeError, ValueError):
            pass
    return out


def match_case(rec, candidates, small=False):
    """The suite cases a Solder record belongs to (empty when none)."""
    for key in ("case", "id", "case_id"):
        if rec.get(key) in suites.CASES_BY_ID:
            return [suites.CASES_BY_ID[rec[key]]]
    prog = rec.get("program") or rec.get("name")
    path = rec.get("file") or rec.get("example") or ""
    stem = os.path.splitext(os.path.basename(path))[0] if path else None
    dims = _dims_of(rec)
    found = []
    for c in candidates:
        if prog not in (c.program.name, c.workload) and stem not in (c.workload,):
            continue
        cd = c.dims(small)
        if not dims:
            continue
        if any(k in dims and dims[k] != v for k, v in cd.items()):
            continue
        if not small and any(k not in dims for k in c.overrides):
            continue
        found.append(c)
    return found          # several when two paper rows share a shape (FlashFuser S4 and G8)


def _better(old, new):
    """Keep the later record unless it failed where the earlier one succeeded."""
    if old is None:
        return new
    if _ok(old) and not _ok(new):
        return old
    return new


def _ok(rec):
    return rec is not None and rec.get("status", "ok") == "ok" and rec.get("median_us") is not None


def load(solder_files, peer_files, selected, small):
    solder, peers, ceilings, unmatched = {}, {}, [], []
    for path in peer_files:
        for r in read_jsonl(path):
            if r.get("record") == "ceiling":
                if not r.get("error"):
                    ceilings.append(r)
            elif r.get("record", "peer") == "peer" and "peer" in r and "case" in r:
                if bool(r.get("small", False)) != small or r["case"] not in selected:
                    continue
                key = (r["case"], r["peer"])
                peers[key] = _better(peers.get(key), r)
    cands = list(selected.values())
    for path in solder_files:
        for r in read_jsonl(path):
            matched = match_case(r, cands, small)
            if not matched:
                unmatched.append(r)
                continue
            med = _num(r, "median_us", "median", "time_us", "us")
            rec = {"median_us": med, "min_us": _num(r, "min_us", "min"), "max_us": _num(r, "max_us", "max"),
                   "floor_us": _num(r, "floor_us", "floor"), "tflops": _num(r, "tflops", "TFLOPs"),
                   "gbs": _num(r, "gbs", "GBs", "gb_s"), "device": r.get("device"), "commit": r.get("commit"),
                   "date": r.get("date"), "verified": r.get("verified", True),
                   "status": "ok" if med is not None and not r.get("error") else "error",
                   "error": r.get("error")}
            for c in matched:
                solder[c.id] = _better(solder.get(c.id), rec)
    return solder, peers, (ceilings[-1] if ceilings else None), unmatched


# --------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------

def _f(x, digits=3):
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits - 1}f}" if x >= 1 else f"{x:.{digits}g}"


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def git_commit():
    try:
        return subprocess.run(["git", "-C", suites.REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def stamp_info(solder, peers, ceiling, commit):
    devs = sorted({r.get("device") for r in list(peers.values()) + list(solder.values()) if r.get("device")})
    peer_any = next(iter(peers.values()), {})
    solder_commits = sorted({r.get("commit") for r in solder.values() if r.get("commit")})
    return {
        "device": ", ".join(devs) or "unknown",
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "peer_date": min((r.get("date", "") for r in peers.values()), default="")[:10],
        "torch": peer_any.get("torch", "?"),
        "triton": peer_any.get("triton"),
        "cuda": peer_any.get("cuda"),
        "peer_commit": peer_any.get("commit", "?"),
        "solder_commit": ", ".join(solder_commits) or "not recorded",
        "ceiling": ceiling,
    }


def suite_table(suite, cases, solder, peers, ceiling, info, small=False):
    used = [p for p in PEER_ORDER if any((c.id, p) in peers for c in cases)]
    ceil = {k: ceiling.get(k) for k in ("copy_TBps", "bf16_mm_TFLOPs", "fp8_mm_TFLOPs")} if ceiling else None
    has_flops = any(c.flops(small) for c in cases)
    lines = [f"# Solder vs peers: {suite}", ""]
    lines.append(f"Device: {info['device']}. Report {info['date']}, commit {info['commit']}. "
                 f"Peers: torch {info['torch']}" + (f", Triton {info['triton']}" if info["triton"] else "")
                 + (f", CUDA {info['cuda']}" if info["cuda"] else "")
                 + f", measured {info['peer_date'] or '?'} at commit {info['peer_commit']}. "
                 f"Solder: commit {info['solder_commit']}.")
    if ceil and all(ceil.values()):
        lines.append(f"Floor = max(bytes / {ceil['copy_TBps']:.2f} TB/s, FLOPs / {ceil['bf16_mm_TFLOPs']:.0f} "
                     f"TFLOP/s bf16 or {ceil['fp8_mm_TFLOPs']:.0f} fp8), ceilings measured in the peers' run.")
    else:
        r = suites.REFERENCE_CEILINGS
        lines.append(f"Floor = max(bytes / {r['copy_TBps']} TB/s, FLOPs / {r['bf16_mm_TFLOPs']:.0f} TFLOP/s bf16 or "
                     f"{r['fp8_mm_TFLOPs']:.0f} fp8) (reference H100 ceilings: this run measured none).")
    lines += ["", "Times are µs per call (median of CUDA-graph replays). In a peer's cell, (x) = Solder / peer: "
              "below 1, Solder is faster. ×floor = time / floor. ✗ = output not within tolerance of the float64 "
              "reference (never compared); skip / err: see the notes.", ""]
    head = ["case", "shape", "floor µs", "Solder µs", "Solder ×floor"]
    if has_flops:
        head.append("Solder TFLOP/s")
    head += [PEER_LABEL.get(p, p) + " µs" for p in used] + ["best peer", "best ×floor", "Solder / best"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    ratios_best, notes_skip, notes_err, notes_wrong, notes_nograph = [], defaultdict(list), [], [], []
    plot_rows = []
    for c in cases:
        fl = suites.floor_us(c, ceil, small) if ceil and all(ceil.values()) else None
        s = solder.get(c.id)
        if fl is None:
            fl = (s or {}).get("floor_us") or suites.floor_us(c, None, small)
        s_us = s["median_us"] if _ok(s) else None
        shape = " ".join(f"{k}{v}" for k, v in c.dims(True).items()) if small else c.tag
        row = [c.id, shape, _f(fl), _f(s_us) if s_us else ("err" if s else "—"),
               _f(s_us / fl) if s_us and fl else "—"]
        if has_flops:
            row.append(_f(c.flops(small) / s_us / 1e6) if s_us and c.flops(small) else "—")
        best = None
        bars = {"Solder": s_us}
        for p in used:
            r = peers.get((c.id, p))
            if r is None:
                row.append("—")
                continue
            st = r.get("status")
            if st == "skipped":
                row.append("skip")
                notes_skip[(p, r.get("note", ""))].append(c.id)
            elif st != "ok":
                row.append("err")
                notes_err.append((c.id, p, (r.get("error") or "").splitlines()[0][:160]))
            elif not r.get("verified", False):
                row.append(f"✗ {_f(r['median_us'])}")
                notes_wrong.append((c.id, p, r.get("rel_err"), r.get("tol")))
            else:
                us = r["median_us"]
                bars[PEER_LABEL.get(p, p)] = us
                mark = "†" if r.get("cuda_graph") is False and "cpu" not in str(r.get("device", "")) else ""
                if mark:
                    notes_nograph.append((c.id, p, r.get("graph_error", "")))
                row.append(f"{_f(us)}{mark} ({_f(s_us / us, 2)})" if s_us else f"{_f(us)}{mark}")
                if best is None or us < best[1]:
                    best = (p, us)
        if best:
            row += [PEER_LABEL.get(best[0], best[0]), _f(best[1] / fl) if fl else "—",
                    _f(s_us / best[1], 2) if s_us else "—"]
            if s_us:
                ratios_best.append(s_us / best[1])
        else:
            row += ["—", "—", "—"]
        lines.append("| " + " | ".join(row) + " |")
        plot_rows.append((c, fl, bars))
    g = geomean(ratios_best)
    lines += ["", f"Geometric mean of Solder / best verified peer over {len(ratios_best)} cases: "
              + (f"**{_f(g)}**" if g else "—") + "."]
    if notes_skip or notes_err or notes_wrong or notes_nograph:
        lines += ["", "Notes:"]
    for cid, p, why in notes_nograph:
        lines.append(f"- † {PEER_LABEL.get(p, p)} on {cid} could not be captured in a CUDA graph and was timed "
                     f"as direct calls (launch gaps included): `{why.splitlines()[0][:160] if why else ''}`")
    for (p, why), ids in notes_skip.items():
        lines.append(f"- {PEER_LABEL.get(p, p)} skipped ({len(ids)} cases: {_short(ids)}): {why}")
    for cid, p, why in notes_err:
        lines.append(f"- {PEER_LABEL.get(p, p)} failed on {cid}: `{why}`")
    for cid, p, rel, tol in notes_wrong:
        lines.append(f"- {PEER_LABEL.get(p, p)} on {cid}: relative error {rel} > {tol}: not compared")
    impl = {}
    for c in cases:
        for p in used:
            r = peers.get((c.id, p))
            if r and r.get("status") == "ok" and r.get("note"):
                impl.setdefault((p, r["note"]), [])
                if c.workload not in impl[(p, r["note"])]:
                    impl[(p, r["note"])].append(c.workload)
    if impl:
        lines += ["", "What each peer runs:"]
        for (p, note), wls in sorted(impl.items(), key=lambda kv: PEER_ORDER.index(kv[0][0])
                                     if kv[0][0] in PEER_ORDER else 99):
            lines.append(f"- {PEER_LABEL.get(p, p)} ({', '.join(wls)}): {note}")
    errs = [r.get("rel_err") for r in peers.values() if r.get("suite") == suite and r.get("rel_err") is not None]
    if errs:
        lines.append(f"\nLargest peer relative error against the float64 reference in this suite: {max(errs):.2e}.")
    return "\n".join(lines) + "\n", plot_rows, g


def _short(ids, n=6):
    return ", ".join(ids[:n]) + (f", … (+{len(ids) - n})" if len(ids) > n else "")


# --------------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------------

def plot_suite(suite, rows, info, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = ["Solder"] + [PEER_LABEL[p] for p in PEER_ORDER if any(PEER_LABEL[p] in b for _, _, b in rows)]
    impls = [i for i in impls if any(b.get(i) for _, _, b in rows)]
    if not impls:
        return False
    per_panel = 16
    panels = [rows[i:i + per_panel] for i in range(0, len(rows), per_panel)]
    width = max(8.0, min(per_panel, len(rows)) * (0.22 * len(impls) + 0.35) + 1.5)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 3.6 * len(panels) + 0.8), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    bw = 0.8 / len(impls)
    for ax, panel in zip(axes[:, 0], panels):
        for k, name in enumerate(impls):
            xs = [i + (k - (len(impls) - 1) / 2) * bw for i in range(len(panel))]
            ys = [b.get(name) or 0 for _, _, b in panel]
            ax.bar(xs, ys, bw, label=name, color=("black" if name == "Solder" else colors[k % len(colors)]),
                   alpha=0.85 if name != "Solder" else 1.0)
        for i, (_, fl, _) in enumerate(panel):
            if fl:
                ax.hlines(fl, i - 0.45, i + 0.45, colors="red", linewidth=1.5,
                          label="floor" if i == 0 else None)
        ax.set_yscale("log")
        ax.set_ylabel("µs per call (log)")
        ax.set_xticks(range(len(panel)))
        ax.set_xticklabels([c.id for c, _, _ in panel], rotation=35, ha="right", fontsize=8)
        ax.set_axisbelow(True)
        ax.grid(axis="y", which="major", alpha=0.4)
        ax.set_xlim(-0.6, len(panel) - 0.4)
    axes[0, 0].legend(fontsize=8, ncol=min(len(impls) + 1, 8), loc="upper left")
    fig.suptitle(f"Solder vs peers — {suite}   ({info['device']}, {info['date']}, commit {info['commit']}, "
                 f"torch {info['torch']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--solder", nargs="*", default=[], help="JSON lines from `solder bench --json`")
    ap.add_argument("--peers", nargs="*", default=[], help="JSON lines from bench/peers.py")
    ap.add_argument("--out-dir", default=os.path.join(suites.REPO, "bench", "results", "h100"))
    ap.add_argument("--suite", default="all", choices=suites.SUITES + ("all",))
    ap.add_argument("--small", action="store_true", help="report runs on the .sol's small dims (script checks)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--commit", default=None, help="commit to stamp (default: git rev-parse --short HEAD)")
    a = ap.parse_args(argv)
    if not a.solder and not a.peers:
        ap.error("give --solder and/or --peers files")
    selected = {c.id: c for c in suites.cases(a.suite)}
    solder, peers, ceiling, unmatched = load(a.solder, a.peers, selected, a.small)
    info = stamp_info(solder, peers, ceiling, a.commit or git_commit())
    os.makedirs(a.out_dir, exist_ok=True)
    summary = []
    for suite in (suites.SUITES if a.suite == "all" else (a.suite,)):
        cases = [c for c in selected.values() if c.suite == suite
                 and (c.id in solder or any(k[0] == c.id for k in peers))]
        if not cases:
            continue
        text, rows, g = suite_table(suite, cases, solder, peers, ceiling, info, a.small)
        md = os.path.join(a.out_dir, f"{suite}.md")
        png = os.path.join(a.out_dir, f"{suite}.png")
        plotted = False
        if not a.no_plots:
            try:
                plotted = plot_suite(suite, rows, info, png + ".tmp.png")
                if plotted:
                    os.replace(png + ".tmp.png", png)
            except ImportError:
                print("note: matplotlib is not installed: no plots (pip install matplotlib)", file=sys.stderr)
        if plotted:
            text += f"\n![{suite}]({suite}.png)\n"
        with open(md + ".tmp", "w") as f:
            f.write(text)
        os.replace(md + ".tmp", md)
        summary.append((suite, len(cases), g))
        print(f"wrote {md}" + (f" and {png}" if plotted else ""))
    if unmatched:
        print(f"warning: {len(unmatched)} Solder record(s) matched no case of the selection, e.g. "
              f"{json.dumps(unmatched[0])[:200]}", file=sys.stderr)
    for suite, n, g in summary:
        print(f"{suite:<12} {n:>3} cases   Solder / best peer (geomean) " + (_f(g) if g else "—"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
