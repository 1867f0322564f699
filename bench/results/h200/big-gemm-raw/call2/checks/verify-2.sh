env SOLDER_GEMM_TAIL_SPLIT=3 timeout 45 build/solder run --backend cuda examples/rmsnorm_gemm.sol --dim T=1000 --dim HID=800 --dim N=5000
