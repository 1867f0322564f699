env SOLDER_ATTN_EXP2_EMU=8 timeout 30 build/solder run --backend cuda examples/diff_attn.sol --dim B=16 --dim S=1024 --dim D=64 --dim H=8
