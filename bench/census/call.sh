#!/usr/bin/env bash
# The census's device call (issue 15, twentieth session), from a root staged by bench/census/stage.sh:
#   1. `solder run --backend cuda` of every line of bench/census/verify.txt (the census programs whose plan
#      the fit's fixes changed, at their default, small and ragged sizes), 4 at a time, into r/verify.txt;
#   2. `solder bench --json` of each timed cell (bench/census/peers.py --dims) with this branch's binary
#      (build/solder) and main's (build/solder-main), ROUNDS (default 2) interleaved rounds (ABBA), into
#      r/solder.jsonl / r/solder-main.jsonl;
#   3. bench/census/peers.py: the same cells as torch.einsum eager and torch.compile (default mode), into
#      r/peers.jsonl.
# r/ is packed into $OUT/r.tgz after every step. The kernels come compiled ahead (kernels.tar.xz).
#   cd DEST && OUT=$OUT LIMIT=120 bash bench/census/call.sh      (DRY_RUN=1: print the commands)
set -uo pipefail
start=$(date +%s)
left() { echo $(( ${LIMIT:-120} - ($(date +%s) - start) )); }
out=${OUT:-/tmp/census-out}; r=r; mkdir -p "$out" "$r"
pack() { tar czf "$out/r.tgz" "$r"; }
run() { if [ "${DRY_RUN:-0}" = 1 ]; then echo "$*"; else eval "$@"; fi; }
if [ "${DRY_RUN:-0}" != 1 ]; then
  python3 -c "
import lzma, os, shutil
for b in ('build/solder', 'build/solder-main'):
    if os.path.exists(b + '.xz'):
        with lzma.open(b + '.xz') as f, open(b, 'wb') as g: shutil.copyfileobj(f, g)
        os.chmod(b, 0o755)"
  mkdir -p .cache && [ -f kernels.tar.xz ] && python3 -c "import tarfile; tarfile.open('kernels.tar.xz').extractall('.cache')"
  nvidia-smi > "$r/device.txt" 2>&1; cat COMMIT >> "$r/device.txt"
fi
export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=$PWD/.cache/kernels SOLDER_COMMIT=$(cat COMMIT 2>/dev/null)
# 1. verification
grep -v '^\s*\(#\|$\)' bench/census/verify.txt | while read -r args; do
  echo "timeout 40 build/solder run $args --backend cuda > \"$r/v-\$(echo '$args' | tr -c 'A-Za-z0-9=' _).txt\" 2>&1; echo \"\$? $args\" >> $r/verify.txt"
done > "$r/verify.cmds"
if [ "${DRY_RUN:-0}" = 1 ]; then cat "$r/verify.cmds"; else xargs -d '\n' -P 4 -n 1 sh -c < "$r/verify.cmds"; fi
pack
# 2. Solder, this branch against main (not where the plans agree: mm_bf16_nt), round 1; 3. the peers;
# 4. round 2 in the reverse order (ABBA), while time is left
cells=$(python3 bench/census/peers.py --list)
solder_round() {
  local round=$1 order="build/solder build/solder-main" list=$cells
  [ $((round % 2)) = 0 ] && { order="build/solder-main build/solder"; list=$(echo $cells | tr ' ' '\n' | tac); }
  for cell in $list; do
    for bin in $order; do
      [ "$bin" = build/solder-main ] && [ "$cell" = mm_bf16_nt ] && continue
      [ "$(left)" -lt "${2:-30}" ] && { echo "skipped $bin $cell round $round" >> "$r/skipped.txt"; continue; }
      tag=$([ "$bin" = build/solder ] && echo solder || echo solder-main)
      run "timeout 25 $bin bench $(python3 bench/census/peers.py --dims "$cell") --json 2>>$r/solder.err | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d[\"cell\"]=\"$cell\"; d[\"round\"]=$round; print(json.dumps(d))' >> $r/$tag.jsonl"
    done
  done
  pack
}
solder_round 1 60
p=$(left); [ "$p" -gt 15 ] && run "timeout $((p > 65 ? 60 : p - 5)) python3 bench/census/peers.py --out $r/peers.jsonl > $r/peers.log 2>&1"
pack
solder_round 2 8
echo "census call: $(( $(date +%s) - start )) s" | tee "$r/done.txt"
pack
