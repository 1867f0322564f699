#!/usr/bin/env bash
# The chosen GEMM configuration of every matrix product of the gemm_chains, moe_routing, quant_gemm,
# rmsnorm_gemm and contractions suite cases (bench/suites.py), as `solder plan FILE --json --row-store`
# and as `solder plan ... --skeleton-only --row-store` print them (the unfused problems of the program; the
# kernels the backend emits are bench/tile_choices.sh's). One line per product: case, problem, both
# choices. To list what a cost-model change moves, run it with the binaries before and after and diff:
#   bench/lrb_plan/plan_choices.sh OLD/solder > before.txt; bench/lrb_plan/plan_choices.sh build/solder > after.txt
# Runs on the build machine (no GPU). lrb-plan (issue 15, bench/NOTES.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
solder=${1:-build/solder}
python3 bench/suites.py --solder-commands --suite all --solder X --out /dev/null 2>/dev/null |
  sed -e 's/^X bench //' -e 's/ --json >>.*$//' |
  grep -E '^examples/(ffn|gated_ffn|moe_routing|quant_gemm|rmsnorm_gemm|linear_relu_backward|nerf_mlp|conv_chain)\.sol' |
  while IFS= read -r args; do
    # shellcheck disable=SC2086
    full=$("$solder" plan $args --json --row-store 2>/dev/null)
    # shellcheck disable=SC2086
    skel=$("$solder" plan $args --json --row-store --skeleton-only 2>/dev/null)
    python3 - "$args" "$full" "$skel" <<'PY'
import json, sys
args, full, skel = sys.argv[1], sys.argv[2], sys.argv[3]
def chosen(text):
    try:
        plans = json.loads(text)["plans"]
    except (ValueError, KeyError):
        return None
    out = []
    for p in plans:
        q = p["problem"]
        c = p["chosen"]
        name = "none" if c.get("none") else c["config"]["name"]
        out.append((f"{q['name']} M={q['m']} N={q['n']} K={q['k']} b{q['batch']} {q['type']}->{q['output']}", name))
    return out
f, s = chosen(full), chosen(skel)
if f is None:
    print(f"{args} :: (no plan)")
    sys.exit(0)
for (prob, a), (_, b) in zip(f, s or [(None, "?")] * len(f)):
    print(f"{args} :: {prob} :: {a} :: skeleton {b}")
PY
  done
