#!/usr/bin/env bash
# Which examples the CUDA backend refuses at other sizes (no GPU needed): `solder emit --cuda --report`
# of every example at its paper size and at a few head dims and sizes, one line per run (OK, or the
# refusal), and the reports themselves for a before/after diff of the plans.
#   bench/dim_scan.sh OUT_DIR [SOLDER]      (OUT_DIR/scan.txt: the lines; OUT_DIR/reports/: each report)
# Needs the CuTe headers (SOLDER_CUTLASS_INCLUDE), as `solder emit` does to plan the skeleton's kernels.
set -uo pipefail
out=${1:?usage: bench/dim_scan.sh OUT_DIR [SOLDER]}
solder=${2:-build/solder}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/reports"
: > "$out/scan.txt"
# example: the --dim sets tried beside the paper size (space-separated sets, commas between a set's dims)
sizes() {
  case $1 in
    alibi|attention_fp8|causal|document_mask|gqa|prefix_lm|sliding_window|softcap|vanilla|diff_attn) echo "D=32 D=128 D=192 D=256 S=4096,D=128";;
    evoformer) echo "D=32 D=128 D=192 D=256 B=8 B=8,D=128 B=8,D=256 S1=64,S2=512";;
    rope_attention) echo "D=64 D=192 D=256";;
    llama_decode) echo "D=64 D=256 KV=16384";;
    paged_decode) echo "D=64 D=256";;
    mla_decode) echo "KV=4096";;
    ffn|gated_ffn) echo "M=4096 K=8192 L=8192";;
    quant_gemm) echo "M=128 K=8192";;
    rmsnorm_gemm) echo "T=128 HID=8192";;
    moe_routing) echo "HID=8192 E=256";;
    nerf_mlp) echo "H=512";;
    conv_chain) echo "KS=5 OC2=512";;
    linear_relu_backward) echo "CI=1024,CO=1024";;
    *) echo "";;
  esac
}
for f in "$root"/examples/*.sol; do
  ex=$(basename "$f" .sol)
  for set in paper $(sizes "$ex"); do
    args=()
    if [ "$set" != paper ]; then IFS=, read -ra dims <<< "$set"; for d in "${dims[@]}"; do args+=(--dim "$d"); done; fi
    tag="$ex-${set//[,=]/_}"
    if msg=$("$solder" emit "$f" --cuda --report "${args[@]}" 2>&1); then
      printf '%-40s OK\n' "$tag" >> "$out/scan.txt"
    else
      printf '%-40s REFUSED %s\n' "$tag" "$(echo "$msg" | tail -1 | cut -c1-300)" >> "$out/scan.txt"
    fi
    echo "$msg" > "$out/reports/$tag.txt"
  done
done
grep -c ' OK$' "$out/scan.txt" | sed 's/$/ OK/'
grep ' REFUSED ' "$out/scan.txt" || true
