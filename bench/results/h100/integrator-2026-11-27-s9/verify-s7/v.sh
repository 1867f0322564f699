export SOLDER_CUTLASS_INCLUDE=$PWD/../cutlass SOLDER_CACHE_DIR=/tmp/kc
O=${OUT:-/tmp/o}; mkdir -p $O
i=0
for a in "examples/ffn.sol --dim M=128 --dim N=9728 --dim K=2560 --dim L=2560" "examples/gated_ffn.sol --dim M=128 --dim N=9728 --dim K=2560 --dim L=2560" "examples/ffn.sol --dim M=128 --dim N=11008 --dim K=4096 --dim L=4096"; do
  i=$((i+1)); ( timeout 140 build/solder run --backend cuda $a > $O/v$i.txt 2>&1; echo "rc=$? $a" >> $O/v$i.txt ) &
done
wait
for f in $O/v*.txt; do tail -n 3 $f; done
