env  timeout 45 build/solder run --backend cuda examples/rmsnorm_gemm.sol --dim T=4096 --dim HID=4096 --dim N=14336
