env  timeout 35 build/solder run --backend cuda examples/alibi.sol --dim B=1 --dim H=4 --dim S=2048
