env  timeout 50 build/solder run --backend cuda examples/evoformer.sol
