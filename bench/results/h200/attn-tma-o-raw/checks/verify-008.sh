env SOLDER_ATTN_O_STORE=tma timeout 30 build/solder run --backend cuda examples/alibi.sol --dim B=4 --dim S=4096 --dim D=64 --dim H=16
