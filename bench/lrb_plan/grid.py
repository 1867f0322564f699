#!/usr/bin/env python3
"""lrb-plan's refit search (issue 15; bench/NOTES.md, lrb-plan), on the build machine (no GPU).

Validates every committed H100 sweep with `solder plan --validate` and prints linear_relu_backward's and
nerf_mlp's skeleton choices for each setting of the temporary environment knobs of
bench/lrb_plan/refit_knobs.patch (apply it to the commit before 86c2823, rebuild solder, run this, revert:
the knobs are not part of the tree). Each argument is one setting, "K=V,K=V"; sweeps whose gaps grow by
more than 0.5 points against the unpatched constants are marked WORSE:

    python3 bench/lrb_plan/grid.py "T_MIF=16,T_CLUB=0.3" "T_MIF=16"

Knobs: T_MIF (splits whose partial reads are priced; 4 before, 16 = all), T_CLU / T_CLUB (the skeleton's
cluster charge, all clusters / clusters along M only), T_OC (factor on the one-consumer step cycles),
T_OVL (staged-store overlap of cooperative tiles), T_SK / T_SKF / T_UNIT (short-K waits, per-unit
cycles), T_LG (loaded-latency growth), T_MCLAT (that growth scaled by the L2 request share under
multicast), T_PRL (latencies per partial block), T_PACE (cluster pacing), T_L2Q / T_L2Q0 (L2 time growing
with bytes in flight), T_L2N (L2 inside the main loop's norm), T_DUMP (print every skeleton choice).
"""
import json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SOLDER = os.environ.get("SOLDER", ROOT + "/build/solder")
SWEEPS = ["gemm-calibration-sweep", "gemm-skeleton-sweep", "gemm-chains3-sweep", "gemm-cluster-sweep", "ffn-s2-sweep",
          "quant-fp8-resweep", "quant-fp8-sweep", "lrb-dw-sweep", "lrb-dw-alone-sweep", "lrb-dx-alone-sweep"]
def val(env, s):
    p = subprocess.run([SOLDER, "plan", "--validate", f"{ROOT}/bench/results/h100/{s}.json", "--json"], env={**os.environ, **env},
                       capture_output=True, text=True, check=True)
    d = json.loads(p.stdout)
    return s, (d["mean_spearman"], 100 * d["mean_gap"], 100 * d["max_gap"], 100 * d["skeleton_max_gap"])
def choices(env):
    out = {}
    for f in ["linear_relu_backward", "nerf_mlp"]:
        p = subprocess.run([SOLDER, "emit", "--cuda", "--report", f"{ROOT}/examples/{f}.sol"], env={**os.environ, **env, "T_DUMP": "1"},
                           capture_output=True, text=True, cwd=ROOT)
        for l in p.stderr.splitlines():
            if l.startswith("T_DUMP") and "row_store 0" not in l or (l.startswith("T_DUMP") and "K=65536" in l):
                key = l.split(" row_store")[0][7:]
                out[key] = l.rsplit("-> ", 1)[1]
    return out
def run(env):
    with ThreadPoolExecutor(4) as ex:
        r = dict(ex.map(lambda s: val(env, s), SWEEPS))
    return r, choices(env)
base, bch = run({})
for arg in ["(unchanged)"] + sys.argv[1:]:
    env = {} if arg == "(unchanged)" else dict(kv.split("=", 1) for kv in arg.split(","))
    r, ch = (base, bch) if not env else run(env)
    print(arg)
    for s, (sp, mg, gap, sk) in r.items():
        b = base[s]
        flag = "  WORSE" if gap > b[2] + 0.5 or sk > b[3] + 0.5 else ""
        print(f"  {s:24} sp {sp:6.3f} ({b[0]:6.3f})  mean gap {mg:5.1f}  worst {gap:5.1f} ({b[2]:5.1f})  skel {sk:5.1f} ({b[3]:5.1f}){flag}")
    for k, v in ch.items():
        print(f"  choice {k:60} {v}")
