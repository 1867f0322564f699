# Sourced by the device-call scripts (bench/decode_attn_call.sh, bench/decode16k/call.sh): `solder run
# --backend cuda` of extra programs against the float64 reference after the A/B. The caller defines left()
# (seconds left in its call) and runs from a staged root (build/solder).
#   extra_compile ARGS...          compile each program ahead, in the background, while the A/B runs;
#   extra_verify FILE MIN ARGS...  check each while more than MIN seconds are left (else "skipped"), one
#                                  line per program in FILE ("rc N ARGS: the run's last 3 lines"), then print FILE.
# Each ARGS is one string of solder arguments, split on spaces ("examples/x.sol --dim KV=3000").
extra_compile() {
  local args
  for args in "$@"; do timeout 60 build/solder bench $args --compile-only > /dev/null 2>&1 & done
}
extra_verify() {
  local file=$1 min=$2 args
  shift 2
  for args in "$@"; do
    [ "$(left)" -gt "$min" ] || { echo "skipped (deadline): $args" >> "$file"; continue; }
    timeout 30 build/solder run --backend cuda $args > "$file.tmp" 2>&1
    echo "rc $? $args: $(tail -n 3 "$file.tmp" | tr '\n' ' ')" >> "$file"
  done
  rm -f "$file.tmp"
  cat "$file"
}
