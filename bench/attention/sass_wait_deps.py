#!/usr/bin/env python3
"""Where a consumer's key-tile loop waits for its P·V, and its short dependencies, from a cuobjdump -sass listing.

    sass_wait_deps.py SASS

The loop: from the first `WARPGROUP.DEPBAR.LE gsb0, 0x1` (S_j done, P_{j-1}·V_{j-1} may still run) to the
first backward branch after it. Prints its instruction count and main opcodes, the position of the wait for
P·V (`DEPBAR.LE gsb0, 0x0`) against the exponentials (MUFU.EX2), and the dependent pairs by distance: an
instruction whose nearest source register was written 1, 2, 3 or 4 instructions before it (a fixed-latency
dependency the warp stalls on unless another warp issues). How the seventeenth session (branch hd64-sched)
read the kernels: `solder emit --cuda` of the cell, nvcc -cubin -O3 -arch=sm_90a -std=c++20 -I device
-I <cutlass> of the emitted file, cuobjdump -sass (PyPI nvidia-cuda-cuobjdump) of the cubin.
"""
import collections
import re
import sys

ins = []
for line in open(sys.argv[1]):
    m = re.search(r'/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))
start = next(i for i, (_, t) in enumerate(ins) if 'DEPBAR.LE gsb0, 0x1' in t)
end = next(i for i in range(start, len(ins))
           if (m := re.search(r'\bBRA 0x([0-9a-f]+)', ins[i][1])) and int(m.group(1), 16) < ins[start][0])
body = ins[start:end + 1]


def opcode(text):
    tok = text.split()
    return (tok[1] if tok[0].startswith('@') else tok[0]).split('.')[0]


NO_DESTINATION = ('HGMMA', 'SYNCS', 'BAR', 'BRA', 'WARPGROUP', 'NOP', 'STS', 'STG', 'EXIT')
ops = collections.Counter(opcode(t) for _, t in body)
distance = collections.Counter()
written = {}
for k, (_, text) in enumerate(body):
    tok = text.split(None, 1)
    if tok[0].startswith('@'):
        tok = tok[1].split(None, 1)
    fields = [f.strip() for f in (tok[1] if len(tok) > 1 else '').split(',')]
    has_destination = fields and not tok[0].startswith(NO_DESTINATION)
    destination = re.findall(r'\bR(\d+)\b', fields[0]) if has_destination else []
    sources = re.findall(r'\bR(\d+)\b', ','.join(fields[1:] if has_destination else fields))
    near = [k - written[r] for r in sources if r in written]
    if near and min(near) <= 4:
        distance[min(near)] += 1
    for r in destination:
        written[r] = k
waits = [k for k, (_, t) in enumerate(body) if 'DEPBAR.LE gsb0, 0x0' in t]
exps = [k for k, (_, t) in enumerate(body) if 'MUFU.EX2' in t]
print(f"loop: {len(body)} instructions; " + ", ".join(f"{o} {ops[o]}" for o in ('MUFU', 'FMNMX', 'FFMA', 'FADD', 'FMUL', 'F2FP', 'SHFL', 'FSEL')))
print(f"wait for P·V at instruction {waits} of the loop; exponentials at {exps[0]}..{exps[-1]}" if exps else f"wait for P·V at {waits}")
print("dependent pairs by distance 1..4:", " / ".join(str(distance[d]) for d in range(1, 5)))
