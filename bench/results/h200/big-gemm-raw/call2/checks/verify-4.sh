env SOLDER_GEMM_TAIL_SPLIT=auto timeout 45 build/solder run --backend cuda bench/programs/bf16_rowscale_gemm.sol --dim T=8192 --dim HID=8192 --dim N=8192
