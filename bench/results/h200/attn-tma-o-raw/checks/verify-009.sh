env SOLDER_ATTN_O_STORE=tma timeout 30 build/solder run --backend cuda examples/vanilla.sol --dim B=16 --dim S=1024 --dim D=128 --dim H=16
