"""Re-measures the configurations of a GEMM sweep file (quant-fp8-sweep.json's format) on the current
binary: each entry's tile forced through SOLDER_GEMM_TILE (and SOLDER_GEMM_SCHEDULE=pingpong for ping-pong
entries) on bench/programs/fp8_rowscale_gemm.sol, `solder bench --replays 20 --json`, and writes a new
sweep file with the measured times, for `solder plan --validate`. The tenth session's integrator ran it
after b8c716f (one wgmma instruction for every tile width), which makes the BN 160 / 224 entries of
quant-fp8's sweep describe kernels that no longer exist.
    python3 bench/quant_fp8/resweep.py SOLDER IN.json OUT.json [--compile-only] [--deadline S]"""
import argparse
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

PROGRAM = os.path.join(os.path.dirname(__file__), "..", "programs", "fp8_rowscale_gemm.sol")


def command(solder, r, compile_only):
    c = r["config"]
    tile = f"{c['bm']}x{c['bn']}s{c['stages']}k{c['split_k']}"
    if c["cluster_m"] * c["cluster_n"] > 1:
        tile += f"c{c['cluster_m']}x{c['cluster_n']}"
    env = dict(os.environ, SOLDER_GEMM_TILE=tile)
    if c.get("pingpong"):
        env["SOLDER_GEMM_SCHEDULE"] = "pingpong"
    args = [solder, "bench", PROGRAM, "--dim", f"M={r['m']}", "--dim", f"N={r['n']}", "--dim", f"K={r['k']}"]
    args += ["--compile-only"] if compile_only else ["--replays", "20", "--json"]
    return args, env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("solder")
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--deadline", type=float, default=1e9)
    opt = ap.parse_args()
    sweep = json.load(open(opt.inp))
    if opt.compile_only:
        with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            list(pool.map(lambda r: subprocess.run(*command(opt.solder, r, True)[:1], env=command(opt.solder, r, True)[1],
                                                   capture_output=True), sweep["results"]))
        return
    start = time.time()
    results = []
    for r in sweep["results"]:
        if time.time() - start > opt.deadline:
            print("deadline: stopped before", r["case"], r["config"])
            break
        args, env = command(opt.solder, r, False)
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        line = next((x for x in p.stdout.splitlines() if x.strip().startswith("{")), None)
        if p.returncode != 0 or not line:
            print("failed:", r["case"], r["config"], p.stderr[-300:])
            continue
        us = json.loads(line)["median_us"]
        print(f"{r['case']} {env['SOLDER_GEMM_TILE']}{' pingpong' if r['config'].get('pingpong') else ''}: "
              f"{us:.2f} us (was {r['time_us']:.2f})", flush=True)
        results.append(dict(r, time_us=round(us, 2)))
    out = dict(sweep, results=results)
    out["source"] = ("bench/quant_fp8/resweep.py on the tenth session's merged binary (one wgmma instruction for "
                     "every tile width), the configurations of quant-fp8-sweep.json; " + sweep["source"])
    json.dump(out, open(opt.out, "w"), indent=1)


if __name__ == "__main__":
    main()
