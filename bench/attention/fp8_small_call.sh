#!/usr/bin/env bash
# fp8-small's device call (issue 17, eighteenth session), from a root staged by bench/merged_stage.sh with
# main's binary beside it as build/solder-main.xz, the CuTe headers in ../cutlass:
#   0. in the background of step 1, `solder run --backend cuda` against the float64 reference, 5 at a time,
#      of attention_fp8 at --small with D 16 / 64 / 128 / 256, the default sizes at D 64 / 128, S 2000
#      (ragged) at D 64 / 128, and of the bf16 attention examples whose plan the branch changed
#      (--small --dim D=128 and D=256: one key tile on the skeleton), into r/verify-small.txt;
#   1. bench/merged_call.sh: the attention device test's e4m3 cases, then bench/attention/fp8_small.spots
#      (this branch's attention_fp8 hd64 / hd128 S 1k, cuDNN bf16 SDPA);
#   2. main's binary on the same two cells (r/solder-main.jsonl; compiled during step 1), then this
#      branch's again (r/solder-again.jsonl): new, cuDNN, main, new.
#   cd .devcarry/fp8-small && DEADLINE=120 bash bench/attention/fp8_small_call.sh
# Everything goes under W (/tmp/mc) and back as $OUT/r.tgz (packed after every step) and $OUT/call.log.
set -uo pipefail
OUT_DIR=${OUT:-/tmp/out}; mkdir -p $OUT_DIR
W=${W:-/tmp/mc}; O=$W; mkdir -p $O/r
start=$(date +%s); left() { echo $(( ${DEADLINE:-120} - ($(date +%s) - start) )); }
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels
bash bench/unpack_staged.sh
export LD_LIBRARY_PATH=$PWD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
pack() { tar czf $OUT_DIR/r.tgz.part -C $O r 2>/dev/null && mv -f $OUT_DIR/r.tgz.part $OUT_DIR/r.tgz; }
# r/ into $OUT every 5 s as well, so that a call cut short keeps what ran (merged_call.sh packs into $W)
(while true; do sleep 5; pack; done) &
packer=$!
cells='^attention_fp8-d(64|128)-s1024$'
# main's kernels into the compile cache while the device test runs
python3 bench/suites.py --suite attention_fp8 --cases "$cells" --solder-commands --compile-only --timeout 100 --solder build/solder-main \
  --out /dev/null | xargs -d '\n' -P 2 -n 1 sh -c > $O/r/compile-main.log 2>&1 &
verify_one() {  # "EXAMPLE ARGS...": solder run --backend cuda against the float64 reference
  local ex=${1%% *} args=${1#* }; [ "$args" = "$1" ] && args=
  timeout 60 build/solder run examples/$ex.sol --backend cuda $args > "$O/r/v-$(echo "$1" | tr ' =' '__').txt" 2>&1
  echo "rc $? : solder run examples/$ex.sol --backend cuda $args"
}
export -f verify_one; export O
printf '%s\n' "attention_fp8 --small" "attention_fp8 --small --dim D=64" "attention_fp8 --small --dim D=128" "attention_fp8 --small --dim D=256" \
  "attention_fp8" "attention_fp8 --dim D=128" "attention_fp8 --dim S=2000" "attention_fp8 --dim S=2000 --dim D=128" \
  "vanilla --small --dim D=128" "causal --small --dim D=128" "gqa --small --dim D=128" "alibi --small --dim D=128" \
  "softcap --small --dim D=128" "sliding_window --small --dim D=128" "prefix_lm --small --dim D=128" \
  "document_mask --small --dim D=128" "diff_attn --small --dim D=128" "vanilla --small --dim D=256" \
  "causal --small --dim D=256" "document_mask --small --dim D=256" "diff_attn --small --dim D=256" |
  xargs -d '\n' -P 5 -I{} bash -c 'verify_one "$1"' _ {} > $O/r/verify-small.txt 2>&1 &
small_pid=$!
MC=$(( $(left) - 30 ))
OUT=$W ROUNDS=1 DEVICE_TESTS=${DEVICE_TESTS-"attention:45:e4m3"} RUN_SH=0 SPOT_SECONDS=0 DEADLINE=$(( MC + 45 )) \
  SPOTS=bench/attention/fp8_small.spots timeout $MC bash bench/merged_call.sh
echo "   merged_call rc $? ($(left) s left)"; pack
while kill -0 $small_pid 2>/dev/null && [ "$(left)" -gt 40 ]; do sleep 1; done
echo "== main's binary, then this branch's again ($(left) s left)"
python3 bench/suites.py --suite attention_fp8 --cases "$cells" --solder-commands --timeout 25 --solder build/solder-main --out $O/r/solder-main.jsonl | sh 2>> $O/r/solder.err
pack
[ "$(left)" -gt 12 ] && python3 bench/suites.py --suite attention_fp8 --cases "$cells" --solder-commands --timeout 20 --out $O/r/solder-again.jsonl | sh 2>> $O/r/solder.err
python3 - $O/r > $O/r/ab.txt 2>&1 <<'PY'
import json, sys, glob, os
d = sys.argv[1]
for f in ["solder.jsonl", "solder-main.jsonl", "solder-again.jsonl", "peers.jsonl"]:
    p = os.path.join(d, f)
    if not os.path.exists(p): continue
    for l in open(p):
        try: r = json.loads(l)
        except Exception: continue
        if r.get("record") == "ceiling": continue
        print(f, r.get("case") or r.get("example"), r.get("dims", ""), r.get("peer", ""), r.get("median_us"), r.get("min_us"), r.get("verified", r.get("status", "")))
PY
kill $packer 2>/dev/null; pack
echo "== small and default sizes"; sort -t: -k2 $O/r/verify-small.txt
echo "== device test"; grep -E "FAIL|passed|cases" $O/r/dt-attention-e4m3.txt | grep -v "^ *[0-9.]* OK" | tail -4
echo "   OK lines: $(grep -c ' OK ' $O/r/dt-attention-e4m3.txt)"
echo "== A/B"; cat $O/r/ab.txt
echo "== done ($(left) s left)"
