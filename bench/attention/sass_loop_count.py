#!/usr/bin/env python3
"""Instructions of one address range of a cuobjdump -sass listing, by opcode, per score.

    sass_loop_count.py SASS START END [SKIP_LO SKIP_HI ...]

Counts the instructions in [START, END) (hex addresses: the consumer loop's head to its backward
branch) minus the skipped ranges (the boundary tiles' mask block that interior tiles branch over),
by opcode, and per score (64 scores per thread and key tile at 64 x 128). How the fourteenth session
(branch variants3) counted them: `solder emit --cuda` of the cell, nvcc -cubin -arch=sm_90a -std=c++20
-I device -I <cutlass> of the emitted file, cuobjdump -sass (PyPI nvidia-cuda-cuobjdump) of the cubin.
"""
import collections
import re
import sys

f = sys.argv[1]
a = [int(x, 16) for x in sys.argv[2:]]
start, end = a[0], a[1]
skips = list(zip(a[2::2], a[3::2]))
ops = collections.Counter()
n = 0
for line in open(f):
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
    if not m:
        continue
    ad = int(m.group(1), 16)
    if not (start <= ad < end) or any(lo <= ad < hi for lo, hi in skips):
        continue
    tok = m.group(2).strip().split()
    if tok[0].startswith('@'):
        tok = tok[1:]
    ops[tok[0].split('.')[0]] += 1
    n += 1
print(f"{f} [{start:#x},{end:#x}) skip {[(hex(x), hex(y)) for x, y in skips]}: {n} instructions, {n / 64:.2f} per score")
print('  ' + ', '.join(f"{k} {v}" for k, v in ops.most_common()))
