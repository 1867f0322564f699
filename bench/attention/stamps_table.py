#!/usr/bin/env python3
"""Splits the attention skeleton's fixed cost per work tile into its parts, from clock stamps.

Reads the records `bench_attention stamps DIR` writes (device/solder/attention/sm90_attention.cuh, "Clock
stamps"; layout in bench_attention.cu) and prints, per file, one markdown table: the mean time of each
phase of a consumer's work tile (µs, at the clock rate the records' globaltimer pairs give), its share of
the tile, the per-key-tile loop, a least-squares fit tile = F + c · key tiles, and the producer's waits.

  python3 bench/attention/stamps_table.py DIR/stamps_*.bin [--json OUT]
  python3 bench/attention/stamps_table.py --self-test
"""
import argparse
import json
import sys

import numpy as np

MAGIC = 0x5354414D50
WORDS = 16

# consumer phases: (name, from word, to word, meaning)
PHASES = [
    ("take→Q", 2, 3, "entry taken → Q landed"),
    ("Q→K0", 3, 4, "Q landed → first K landed"),
    ("turn0", 4, 5, "first K landed → turn taken"),
    ("S0 issue", 5, 6, "first S issued (wgmma issue)"),
    ("S0 wait", 6, 7, "first S done (latency, no P·V of this consumer beside it)"),
    ("softmax0", 7, 8, "first tile's softmax, P to registers"),
    ("loop", 8, 9, "key tiles 1 .. n−1 up to the last S done"),
    ("last softmax+V", 9, 10, "last S done → last V landed (last softmax, P·V n−2 wait)"),
    ("last turn", 10, 11, "last V landed → turn taken"),
    ("last P·V", 11, 12, "last P·V issued and done (no S beside it)"),
    ("epilogue", 12, 13, "O / Σp, stores issued"),
]


def cycles(later, earlier):
    """later − earlier of 32-bit SM clocks (modulo 2^32)."""
    return (later - earlier) & 0xFFFFFFFF


def load(path):
    raw = np.fromfile(path, dtype=np.uint64)
    header = raw[:8].astype(np.int64)
    if header[0] != MAGIC:
        raise SystemExit(f"{path}: not a stamps file")
    consumers, total, words = int(header[1]), int(header[2]), int(header[3])
    if words != WORDS:
        raise SystemExit(f"{path}: {words} words per record, expected {WORDS}")
    records = raw[8:].reshape(total, consumers + 1, words)
    meta = dict(consumers=consumers, total=total, batch=int(header[4]), heads=int(header[5]), seq=int(header[6]), dim=int(header[7]))
    return meta, records


def analyse(meta, records):
    consumers = meta["consumers"]
    head = records[:, :, 0]
    if not np.all(head >> np.uint64(63)):
        missing = int(np.sum((head >> np.uint64(63)) == 0))
        print(f"warning: {missing} records not written", file=sys.stderr)
    count = ((head >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.int64)
    block = ((head >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.int64)
    cons = records[:, 1:, :].astype(np.int64)  # [tile][consumer][word]; words 2 .. 13: 32-bit clocks
    cnt = count[:, 1:]
    blk = block[:, 1:]
    # clock rate: cycles per ns over each consumer record (take → epilogue) with a long enough span
    span_ns = cons[:, :, 14] - cons[:, :, 1]
    span_cy = cycles(cons[:, :, 13], cons[:, :, 2])
    ok = span_ns > 2000
    ghz = float(np.median(span_cy[ok] / span_ns[ok])) if np.any(ok) else 1.755
    us = 1.0 / (ghz * 1e3)  # µs per cycle
    live = cnt > 0
    out = {"ghz": ghz, "tiles": int(meta["total"]), "phases": [], "by_count": {}}
    tile_cy = cycles(cons[:, :, 13], cons[:, :, 2])
    # the gap after each tile: the same block's and consumer's next take (globaltimer order)
    gap = np.full(cnt.shape, np.nan)
    for c in range(consumers):
        order = np.lexsort((cons[:, c, 1], blk[:, c]))
        b = blk[order, c]
        t1 = cons[order, c, 1]
        t14 = cons[order, c, 14]
        same = b[1:] == b[:-1]
        g = np.where(same, t1[1:] - t14[:-1], np.nan).astype(float)
        gap[order[:-1], c] = g
    mean_tile = float(np.mean(tile_cy[live])) * us
    for name, a, b, meaning in PHASES:
        d = cycles(cons[:, :, b], cons[:, :, a])[live] * us
        out["phases"].append(dict(name=name, mean=float(np.mean(d)), median=float(np.median(d)), share=float(np.mean(d)) / mean_tile, meaning=meaning))
    g = gap[live]
    g = g[~np.isnan(g)] * 1e-3  # ns → µs
    out["gap"] = float(np.mean(g)) if g.size else float("nan")
    out["mean_tile"] = mean_tile
    out["mean_keys"] = float(np.mean(cnt[live]))
    loop_n = cnt[live] - 1
    loop_d = cycles(cons[:, :, 9], cons[:, :, 8])[live] * us
    out["loop_per_key_tile"] = float(np.sum(loop_d[loop_n > 0]) / max(1, np.sum(loop_n[loop_n > 0])))
    # F + c·n over the tiles, with the gap to the next tile counted in (what a block pays per tile)
    full = tile_cy[live] * us + np.nan_to_num(gap[live] * 1e-3, nan=0.0)
    n = cnt[live].astype(float)
    if np.ptp(n) > 0:
        c_fit, f_fit = np.polyfit(n, full, 1)
    else:
        c_fit, f_fit = float("nan"), float(np.mean(full))
    out["fit_F"], out["fit_c"] = float(f_fit), float(c_fit)
    for k in sorted(set(cnt[live].tolist())):
        sel = cnt == k
        out["by_count"][int(k)] = dict(tiles=int(np.sum(sel)), mean=float(np.mean(tile_cy[sel])) * us)
    # kernel: first take to last epilogue over every record (globaltimer), and the blocks' ends
    start = np.min(cons[:, :, 1][cons[:, :, 1] > 0])
    ends = {}
    for c in range(consumers):
        for t in range(cons.shape[0]):
            ends[blk[t, c]] = max(ends.get(blk[t, c], 0), cons[t, c, 14])
    end_values = np.array(list(ends.values()), dtype=np.int64)
    out["kernel_us"] = float(np.max(end_values) - start) * 1e-3
    out["block_end_mean_us"] = float(np.mean(end_values) - start) * 1e-3
    out["block_end_min_us"] = float(np.min(end_values) - start) * 1e-3
    # producer
    prod = records[:, 0, :].astype(np.int64)
    pcount = count[:, 0]
    plive = pcount > 0
    out["producer"] = dict(
        q_buffer_wait=float(np.mean(cycles(prod[:, 3], prod[:, 2])[plive])) * us,
        first_stage_wait=float(np.mean(cycles(prod[:, 5], prod[:, 4])[plive])) * us,
        load_span=float(np.mean(cycles(prod[:, 6], prod[:, 2])[plive])) * us,
    )
    # a data mask's classifier warps (producer words 7 .. 10; 0 for each block's first work tile): entry
    # read → list buffer free → classes written → list posted, and how long before consumer 0 took the
    # entry the list was posted (negative: the consumer had to wait for it)
    cls = plive & (prod[:, 7] != 0) & (prod[:, 10] != 0)
    if np.any(cls):
        ahead = ((cons[:, 0, 2] - prod[:, 10] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # signed cycles
        a = ahead[cls] * us
        out["classifier"] = dict(
            tiles=int(np.sum(cls)),
            buffer_wait=float(np.mean(cycles(prod[:, 8], prod[:, 7])[cls])) * us,
            classify=float(np.mean(cycles(prod[:, 9], prod[:, 8])[cls])) * us,
            compact=float(np.mean(cycles(prod[:, 10], prod[:, 9])[cls])) * us,
            posted_ahead_mean=float(np.mean(a)),
            posted_ahead_median=float(np.median(a)),
            late_share=float(np.mean(a < 0.05)),
        )
    return out


def table(name, meta, r):
    lines = [f"### {name}: B {meta['batch']} H {meta['heads']} S {meta['seq']} d {meta['dim']}, {meta['consumers']} consumers, {r['tiles']} work tiles",
             "",
             f"clock {r['ghz']:.3f} GHz; kernel (first take → last epilogue) {r['kernel_us']:.1f} µs; blocks end at {r['block_end_min_us']:.1f} … {r['kernel_us']:.1f} (mean {r['block_end_mean_us']:.1f}) µs",
             f"mean work tile (consumer, take → stores issued) {r['mean_tile']:.2f} µs at {r['mean_keys']:.2f} key tiles; gap to the next take {r['gap']:.2f} µs",
             f"fit over tiles (tile + gap) = F + c·n: F {r['fit_F']:.2f} µs, c {r['fit_c']:.3f} µs; loop per key tile {r['loop_per_key_tile']:.3f} µs",
             "",
             "| phase | mean µs | median µs | share of tile | what |",
             "|---|---:|---:|---:|---|"]
    for p in r["phases"]:
        lines.append(f"| {p['name']} | {p['mean']:.3f} | {p['median']:.3f} | {100 * p['share']:.1f} % | {p['meaning']} |")
    lines.append(f"| gap | {r['gap']:.3f} | | | stores issued → next entry taken (work ring, next tile's locate) |")
    pr = r["producer"]
    lines += ["",
              f"producer per tile: Q buffer wait {pr['q_buffer_wait']:.2f} µs, first K stage wait {pr['first_stage_wait']:.2f}, load span {pr['load_span']:.2f}",
              ""]
    if "classifier" in r:
        cl = r["classifier"]
        lines += [f"classifier warps per tile ({cl['tiles']} tiles): list buffer wait {cl['buffer_wait']:.2f} µs, classify {cl['classify']:.2f}, "
                  f"compact {cl['compact']:.2f}; list posted {cl['posted_ahead_mean']:.2f} µs (median {cl['posted_ahead_median']:.2f}) before consumer 0 "
                  f"took the entry, within 0.05 µs or after it on {100 * cl['late_share']:.0f} % of tiles",
                  ""]
    lines += [
              "key tiles → mean tile µs: " + ", ".join(f"{k}: {v['mean']:.2f} ({v['tiles']})" for k, v in r["by_count"].items()),
              ""]
    return "\n".join(lines)


def synthetic():
    """Records of a made-up kernel with known phases (2 consumers, 4 blocks, n key tiles 1..4)."""
    consumers, total = 2, 16
    rec = np.zeros((total, consumers + 1, WORDS), dtype=np.uint64)
    ghz = 2.0
    clock = {}
    for t in range(total):
        b, n = t % 4, 1 + t % 4
        for c in range(consumers + 1):
            key = (b, c)
            t0 = clock.get(key, 1000 * b)
            rec[t, c, 0] = (1 << 63) | (c << 48) | (n << 32) | (b << 16) | b
            # cycles from word k − 1 to word k (k = 3 .. 13)
            if c > 0:
                delta = {3: 100, 4: 100, 5: 50, 6: 20, 7: 300, 8: 200, 9: 1000 * (n - 1), 10: 300, 11: 50, 12: 400, 13: 500}
            else:
                delta = {k: 10 for k in range(3, 14)}
            w = t0 + (1 << 32) - 3000  # (clocks that wrap past 2^32 inside the records)
            rec[t, c, 2] = w & 0xFFFFFFFF
            for word in range(3, 14):
                w += delta[word]
                rec[t, c, word] = w & 0xFFFFFFFF
            rec[t, c, 1] = int(t0 / ghz)
            rec[t, c, 14] = int((t0 + w - (t0 + (1 << 32) - 3000)) / ghz)
            clock[key] = t0 + w - (t0 + (1 << 32) - 3000) + 200
    return dict(consumers=consumers, total=total, batch=1, heads=1, seq=512, dim=64), rec, ghz


def self_test():
    meta, rec, ghz = synthetic()
    r = analyse(meta, rec)
    assert abs(r["ghz"] - ghz) < 0.01, r["ghz"]
    phase = {p["name"]: p["mean"] for p in r["phases"]}
    assert abs(phase["S0 wait"] - 300 / ghz / 1e3) < 1e-6, phase
    assert abs(r["loop_per_key_tile"] - 1000 / ghz / 1e3) < 1e-6, r["loop_per_key_tile"]
    assert abs(r["fit_c"] - 1000 / ghz / 1e3) < 1e-3, r["fit_c"]
    assert abs(r["gap"] - 200 / ghz / 1e3) < 1e-3, r["gap"]
    # the producer's words 7 .. 10 (a data mask's classifier warps) are 10 cycles apart in the synthetic records
    assert abs(r["classifier"]["classify"] - 10 / ghz / 1e3) < 1e-6, r["classifier"]
    print(table("synthetic", meta, r))
    print("stamps_table self-test: ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return
    results = {}
    for path in a.files:
        meta, rec = load(path)
        r = analyse(meta, rec)
        name = path.rsplit("/", 1)[-1].removeprefix("stamps_").removesuffix(".bin")
        print(table(name, meta, r))
        results[name] = dict(meta=meta, **r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
