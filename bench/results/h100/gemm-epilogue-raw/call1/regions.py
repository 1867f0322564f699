import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
h = rows[1]; data = [r for r in rows[2:] if len(r) == len(h)]
ix = {n: i for i, n in enumerate(h)}
S = ix["Warp Stall Sampling (All Samples)"]; E = ix["Instructions Executed"]
tot = sum(int(r[S] or 0) for r in data)
# regions: contiguous address ranges split at markers: find first/last QGMMA/HGMMA address
addr = [int(r[0], 16) for r in data]
mma = [a for a, r in zip(addr, data) if 'GMMA' in r[1]]
lo, hi = min(mma), max(mma)
# main loop: from the TRYWAIT before first GMMA to DEPBAR after last: approximate [lo-0x200, hi+0x200]
reg = collections.Counter(); insts = collections.Counter()
for a, r in zip(addr, data):
    s = int(r[S] or 0)
    if lo - 0x300 <= a <= hi + 0x1a0: k = 'mainloop'
    elif a > hi: k = 'after (epilogue, tail)'
    else: k = 'before (setup, producer)'
    reg[k] += s; insts[k] += int(r[E] or 0)
for k, v in reg.items(): print(f"{k:28s} {100*v/tot:5.1f}% of samples, {insts[k]} warp instructions")
