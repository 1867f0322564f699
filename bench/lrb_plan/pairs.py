#!/usr/bin/env python3
"""Every committed sweep's pairs of one tile measured with and without a cluster (lrb-plan; bench/NOTES.md):
measured and predicted difference (cluster minus plain) and the model's error, for the solder in $SOLDER
(default build/solder) and the knobs in the environment (bench/lrb_plan/refit_knobs.patch)."""
import json, subprocess, os, sys
env = {**os.environ}
S = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "h100") + "/"
rows = []
for s in ["gemm-cluster-sweep", "lrb-dw-alone-sweep", "lrb-dx-alone-sweep", "lrb-dw-sweep", "quant-fp8-resweep", "gemm-skeleton-sweep"]:
    d = json.loads(subprocess.run([os.environ.get("SOLDER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "solder")), "plan", "--validate", S + s + ".json", "--json"], env=env, capture_output=True, text=True).stdout)
    for p in d["problems"]:
        t = {x["config"]: x for x in p["table"]}
        for name, x in t.items():
            for cl in [" c2x1 ", " c1x2 ", " c2x2 ", " c1x4 "]:
                if cl in name:
                    base = name.replace(cl, " c1x1 ")
                    if base in t:
                        y = t[base]
                        rows.append((s, p["problem"][:28], name, x["measured_us"] - y["measured_us"], x["predicted_us"] - y["predicted_us"]))
for r in rows:
    print("%-20s %-28s %-42s meas %+6.2f pred %+6.2f err %+6.2f" % (r[0][:20], r[1], r[2], r[3], r[4], r[4] - r[3]))
