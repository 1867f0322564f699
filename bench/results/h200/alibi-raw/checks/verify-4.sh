env SOLDER_ATTN_STAGES=5 timeout 35 build/solder run --backend cuda examples/alibi.sol
