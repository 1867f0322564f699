env SOLDER_ATTN_O_STORE=tma timeout 30 build/solder run --backend cuda examples/alibi.sol --dim B=16 --dim S=1024 --dim D=64 --dim H=16
