env  timeout 35 build/solder run --backend cuda examples/alibi.sol --dim B=1 --dim S=16384
