"""The benchmarks' timing rule for the Python peers, in one place (graph_timer.h is the C++ one): CUDA
events around replays of a CUDA graph that holds `calls` calls, the median over the replays, per call.

    sys.path.insert(0, <repository>/bench/common); from graph_timing import median_us
    median_us(fn, arg_sets=[(a0, b0), (a1, b1)], calls=64, replays=15)

fn(*arg_sets[i % len(arg_sets)]) is the i-th call: several argument sets, together larger than the 50 MB
L2, keep the timed calls from reading inputs the previous call left in L2 (as `solder bench` rotates its
inputs). The calls are warmed up on a side stream first (lazy initialisation and autotuning must not
happen inside the capture), the graph is replayed `warm` times, then timed. bench/peers.py keeps its own
timer, which also returns the first call's output for checking.
"""
import statistics

import torch


def median_us(fn, arg_sets=((),), calls=None, replays=15, warm=2):
    """Median µs per call of fn over `replays` timed replays of one graph of `calls` calls (default: one
    per argument set)."""
    arg_sets = list(arg_sets)
    calls = calls or len(arg_sets)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(max(2, len(arg_sets))):
            fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(*arg_sets[i % len(arg_sets)])
    for _ in range(warm):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)
