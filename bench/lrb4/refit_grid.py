#!/usr/bin/env python3
"""lrb4's cost-model refit search (issue 15; bench/NOTES.md, "lrb4"), on the build machine (no GPU).

Validates the committed H100 sweeps with `solder plan --validate` for each setting of the temporary
environment knobs of bench/lrb4/refit_knobs.patch (apply it, rebuild solder, run this, revert it: the
knobs are not part of the tree), and prints per sweep the Spearman, the worst gap and the skeleton path's
worst gap, marking sweeps whose gaps grew by more than 0.5 points against the unpatched constants:

    git apply bench/lrb4/refit_knobs.patch && cmake --build build --target solder
    python3 bench/lrb4/refit_grid.py "T_OC=0.75,T_CLU=0.5" "T_STAGED_OVERLAP=1"
    git checkout src/plan/cost_model.cpp && cmake --build build --target solder

Knobs: T_MODE (0 busy SMs, 1 the chip's L2 bytes in flight, 2 both), T_G / T_G2 / T_Q0 / T_QREF (the
latency growth), T_H / T_H0 (the L2 rate's loss above a bytes-in-flight threshold), T_CLU (the skeleton's
cluster charge, µs), T_OC (factor on the one-consumer step cycles), T_STAGED_OVERLAP (candidate B).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SWEEPS = ["lrb-dx-alone-sweep", "lrb-dw-alone-sweep", "lrb-dw-sweep", "ffn-s2-sweep", "gemm-calibration-sweep",
          "gemm-chains3-sweep", "gemm-cluster-sweep", "gemm-skeleton-sweep", "quant-fp8-resweep"]


def run(env, solder):
    out = {}
    for s in SWEEPS:
        p = subprocess.run([solder, "plan", "--validate", os.path.join(ROOT, "bench/results/h100", s + ".json"), "--json"],
                           env={**os.environ, **env}, capture_output=True, text=True, check=True)
        d = json.loads(p.stdout)
        out[s] = (d["mean_spearman"], 100 * d["max_gap"], 100 * d["skeleton_max_gap"],
                  d["problems"][0]["skeleton_choice"] if len(d["problems"]) == 1 else "")
    return out


def main():
    solder = os.environ.get("SOLDER", os.path.join(ROOT, "build/solder"))
    base = run({}, solder)
    for arg in ["(unchanged)"] + sys.argv[1:]:
        env = {} if arg == "(unchanged)" else dict(kv.split("=", 1) for kv in arg.split(","))
        o = base if not env else run(env, solder)
        print(arg)
        for s, (sp, gap, skel, choice) in o.items():
            worse = gap > base[s][1] + 0.5 or skel > base[s][2] + 0.5
            print(f"  {s:24} Spearman {sp:6.3f}  worst gap {gap:5.1f} %  skeleton path {skel:5.1f} %  {choice}"
                  + ("  WORSE" if worse else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
