env  timeout 35 build/solder run --backend cuda examples/alibi.sol --dim B=4 --dim S=4096
