env SOLDER_ATTN_BIAS_BN=64 timeout 50 build/solder run --backend cuda examples/evoformer.sol
