env  timeout 35 build/solder run --backend cuda examples/alibi.sol
