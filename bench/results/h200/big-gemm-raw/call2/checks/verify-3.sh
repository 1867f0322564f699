env SOLDER_GEMM_TAIL_SPLIT=4 timeout 45 build/solder run --backend cuda examples/rmsnorm_gemm.sol --dim T=2500 --dim HID=1000 --dim N=4096
