import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
h = rows[1]; data = [r for r in rows[2:] if len(r) == len(h)]
ix = {n: i for i, n in enumerate(h)}
stall_cols = [n for n in h if n.startswith('stall_') and '(Not Issued)' not in n]
tot = sum(int(r[ix["Warp Stall Sampling (All Samples)"]] or 0) for r in data)
print("instructions", len(data), "samples", tot)
agg = collections.Counter()
for r in data:
    for n in stall_cols:
        agg[n] += int(r[ix[n]] or 0)
print("stall reasons:", ", ".join(f"{k[6:]} {100*v/tot:.1f}%" for k, v in agg.most_common(10)))
# top instructions
top = sorted(data, key=lambda r: -int(r[ix["Warp Stall Sampling (All Samples)"]] or 0))[:int(sys.argv[2]) if len(sys.argv)>2 else 25]
for r in top:
    s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
    reasons = sorted(((int(r[ix[n]] or 0), n[6:]) for n in stall_cols), reverse=True)[:3]
    print(f"{100*s/tot:5.1f}% {r[0][-5:]} {r[1].strip()[:60]:60s} exec {r[ix['Instructions Executed']]:>8s} " + " ".join(f"{n}:{v}" for v, n in reasons if v))
