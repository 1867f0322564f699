#!/usr/bin/env bash
# A census-style device call with Solder variants (issue 15, twenty-first session, opcopy), from a root staged
# by bench/census/stage.sh (build/solder: this branch; build/solder-main: main's binary):
#   1. `solder run --backend cuda` of every line of VERIFY (ENV=V words first, then the run's arguments),
#      VERIFY_JOBS (4) at a time, into r/verify.txt (exit status and line) and r/v-*.txt;
#   2. round 1 of the A/B lines of AB ("TAG BIN [ENV=V ...] -- PROGRAM ARGS": `BIN bench ... --json` with the
#      ENV words set, one record per line into r/solder.jsonl with its "tag" and "round"), then the peers
#      (bench/census/peers.py --set PEER_SET, eager and torch.compile default mode) into r/peers.jsonl, then
#      round 2 in the reverse order (ABBA) while time is left. A round-1 line starts only with NEED1 (45) s of
#      LIMIT left, so that the peers keep their time.
# r/ is packed into $OUT/r.tgz after every step. The kernels come compiled ahead (kernels.tar.xz).
#   cd DEST && OUT=$OUT LIMIT=120 VERIFY=bench/census/opcopy_verify.txt AB=bench/census/opcopy_ab.txt \
#     PEER_SET=opcopy bash bench/census/call_ab.sh        (DRY_RUN=1: print the commands)
# PEER_CELLS (comma-separated cells of the set; unset: all of them) limits the peers to the call's cells.
set -uo pipefail
start=$(date +%s)
left() { echo $(( ${LIMIT:-120} - ($(date +%s) - start) )); }
out=${OUT:-/tmp/census-out}; r=r; mkdir -p "$out" "$r"
pack() { [ "${DRY_RUN:-0}" = 1 ] || tar czf "$out/r.tgz" "$r"; }
run() { if [ "${DRY_RUN:-0}" = 1 ]; then echo "$*"; else eval "$@"; fi; }
lines() { grep -v '^\s*\(#\|$\)' "$1"; }
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
lines "${VERIFY:?VERIFY names the verification lines}" | while read -r line; do
  envs=$(echo "$line" | grep -o '^\([A-Z_]*=[^ ]* \)*'); args=${line#"$envs"}
  echo "$envs timeout 40 build/solder run $args --backend cuda > \"$r/v-$(echo "$line" | tr -c 'A-Za-z0-9=' _).txt\" 2>&1; echo \"\$? $line\" >> $r/verify.txt"
done > "$r/verify.cmds"
if [ "${DRY_RUN:-0}" = 1 ]; then cat "$r/verify.cmds"; else xargs -d '\n' -P "${VERIFY_JOBS:-4}" -n 1 sh -c < "$r/verify.cmds"; fi
pack
# 2. the A/B lines, round 1; 3. the peers; 4. round 2 in the reverse order, while time is left
ab_round() {
  local round=$1 need=$2
  local list; list=$(lines "${AB:?AB names the A/B lines}"); [ $((round % 2)) = 0 ] && list=$(echo "$list" | tac)
  echo "$list" | while read -r tag bin rest; do
    envs=${rest%%--*}; args=${rest#*-- }
    [ "$(left)" -lt "$need" ] && { echo "skipped $tag $bin round $round" >> "$r/skipped.txt"; continue; }
    run "$envs timeout 25 build/$bin bench $args --json 2>>$r/solder.err | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d.update(tag=\"$tag\", binary=\"$bin\", env=\"$(echo $envs)\", round=$round); print(json.dumps(d))' >> $r/solder.jsonl"
  done
  pack
}
ab_round 1 ${NEED1:-45}
p=$(left); [ "$p" -gt 15 ] && run "timeout $((p > 55 ? 50 : p - 5)) python3 bench/census/peers.py --set ${PEER_SET:-opcopy}${PEER_CELLS:+ --cells $PEER_CELLS} --out $r/peers.jsonl > $r/peers.log 2>&1"
pack
ab_round 2 8
echo "call_ab: $(( $(date +%s) - start )) s" | tee "$r/done.txt"
pack
