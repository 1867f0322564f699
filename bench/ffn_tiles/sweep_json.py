#!/usr/bin/env python3
"""ffn-tiles' sweep (whole ffn programs, one product's tile forced per spot) as a `solder plan --validate` sweep.

Usage: sweep_json.py R_DIR SPOTS OUT.json [--device NAME --date DATE --commit HASH]

Each spot line TAG = CELL{u|d}-TILE names the product it forces (u: the up projection, 128 x N x K; d: the down
projection, 128 x L x N); the line "-" is the planner's plan. A product's time is not measured alone: the
program's time (the median of the rounds' medians) minus the other product's share of the planner's program,
that share being the planner's program time split between its two products in the ratio of the cost model's
predictions (`solder plan`). Spearman within a product is exact (one offset per product); the gaps depend on that
split. gated_ffn lines are left out (its up projection is a dual-B product, its down projection is ffn-S6's).
"""
import json, re, statistics, subprocess, sys, glob, os

CELLS = {  # cell tag -> (case, dims)
    "s1": ("ffn-S1", dict(M=128, N=8192, K=3072, L=3072)), "s3": ("ffn-S3", dict(M=128, N=11008, K=4096, L=4096)),
    "s5": ("ffn-S5", dict(M=128, N=11008, K=2048, L=2048)), "s6": ("ffn-S6", dict(M=128, N=8960, K=1536, L=1536)),
    "s7": ("ffn-S7", dict(M=128, N=9728, K=2560, L=2560)), "g5": ("ffn-G5", dict(M=128, N=16384, K=4096, L=4096)),
}


def medians(path, dims):
    """median over rounds of the records' medians, for the records of `dims`"""
    rounds = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("program") == "ffn" and all(r["dims"][k] == v for k, v in dims.items()):
            rounds.setdefault(r["round"], []).append(r["median_us"])
    vals = [statistics.median(v) for v in rounds.values()]
    return statistics.median(vals) if vals else None


def planner(dims, solder="build/solder"):
    """the planner's tile and predicted time of each product: {'u': (tile dict, us), 'd': ...}"""
    args = [solder, "emit", "--cuda", "--report", "examples/ffn.sol"] + sum([["--dim", f"{k}={v}"] for k, v in dims.items()], [])
    out = subprocess.run(args, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.search(r"tile BM (\d+) x BN (\d+) x BK \d+, (\d+) stages(?:, split-K (\d+))?(?:, cluster (\d+)x(\d+))?.*?M (\d+) N (\d+) K (\d+).*?; ([0-9.]+) us predicted", line)
        if not m or "GEMM skeleton" not in line:
            continue
        bm, bn, st, sk, cm, cn, M, N, K, us = m.groups()
        which = "u" if int(N) == dims["N"] else "d"
        res[which] = (dict(bm=int(bm), bn=int(bn), stages=int(st), split_k=int(sk or 1), cluster_m=int(cm or 1),
                           cluster_n=int(cn or 1)), float(us))
    return res


def parse_tile(text):
    m = re.fullmatch(r"(\d+)x(\d+)s(\d+)k(\d+)(?:c(\d+)x(\d+))?", text)
    bm, bn, st, sk, cm, cn = m.groups()
    return dict(bm=int(bm), bn=int(bn), stages=int(st), split_k=int(sk), cluster_m=int(cm or 1), cluster_n=int(cn or 1))


def record(dims, which, tile, us, pingpong=False):
    m, n, k = (128, dims["N"], dims["K"]) if which == "u" else (128, dims["L"], dims["N"])
    tiles = -(-m // tile["bm"]) * -(-n // tile["bn"]) * tile["split_k"]
    consumers = 2 if tile["bm"] == 128 or pingpong else 1
    return {"dtype": "f16", "m": m, "n": n, "k": k, "batch": 1, "output": "f16", "row_store": True,
            "config": dict(bm=tile["bm"], bn=tile["bn"], bk=64, stages=tile["stages"], consumers=consumers, a_k_major=True,
                           b_k_major=False, split_k=tile["split_k"], cluster_m=tile["cluster_m"], cluster_n=tile["cluster_n"],
                           blocks=min(tiles, 132)),
            "time_us": round(us, 3), "tile": "%dx%ds%dk%d" % (tile["bm"], tile["bn"], tile["stages"], tile["split_k"]) +
            ("c%dx%d" % (tile["cluster_m"], tile["cluster_n"]) if tile["cluster_m"] * tile["cluster_n"] > 1 else "") +
            (" pingpong" if pingpong else "")}


def main():
    rdir, spots, out = sys.argv[1:4]
    opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
    results = []
    for cell, (case, dims) in CELLS.items():
        base = medians(os.path.join(rdir, "solder.jsonl"), dims)
        plan = planner(dims)
        total_pred = plan["u"][1] + plan["d"][1]
        share = {w: base * plan[w][1] / total_pred for w in "ud"}
        for w in "ud":
            results.append(record(dims, w, plan[w][0], share[w]))
        for f in sorted(glob.glob(os.path.join(rdir, f"solder-{cell}[ud]-*.jsonl"))):
            tag = os.path.basename(f)[len("solder-"):-len(".jsonl")]
            which, tile = tag[len(cell)], parse_tile(tag.split("-", 1)[1])
            t = medians(f, dims)
            other = "d" if which == "u" else "u"
            # the ping-pong: a 64-row tile with two consumers, what the forced path takes where it prices it faster
            pingpong = tile["bm"] == 64 and which == "u" and tile["bn"] == 128
            results.append(record(dims, which, tile, t - share[other], pingpong))
    doc = {"device": opts.get("--device", "NVIDIA H200"), "date": opts.get("--date", ""),
           "kernel": "generated skeleton kernels of examples/ffn.sol at ffn S1 / S3 / S5 / S6 / S7 / G5 (f16, row-store "
                     "epilogue; the up projection's GELU), one product's tile forced with SOLDER_GEMM_TILE per program, "
                     "timed by solder bench in two interleaved rounds (merged_call.sh); a product's time is the "
                     "program's minus the other product's share of the planner's program (bench/ffn_tiles/sweep_json.py); "
                     "commit " + opts.get("--commit", ""),
           "results": results}
    json.dump(doc, open(out, "w"), indent=1)
    print(f"{len(results)} results -> {out}")


main()
