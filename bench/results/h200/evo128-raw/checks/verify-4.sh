env  timeout 50 build/solder run --backend cuda examples/evoformer.sol --dim S1=8 --dim S2=192
