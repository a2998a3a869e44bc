import csv, sys, collections
path = sys.argv[1]
rows = list(csv.reader(open(path)))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
def num(s):
    try: return float(s.replace(',', ''))
    except: return 0.0
ops = collections.Counter(); stalls = collections.Counter(); total = 0
stall_cols = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
per_instr = []
for r in data:
    if len(r) < len(hdr): continue
    n = num(r[ix['Instructions Executed']])
    src = r[ix['Source']].strip()
    op = src.split()[0] if src else '?'
    if op.startswith('@'): op = src.split()[1]
    base = op.split('.')[0]
    ops[base] += n; total += n
    for c in stall_cols: stalls[c] += num(r[ix[c]])
    per_instr.append((num(r[ix['Warp Stall Sampling (All Samples)']]), r[ix['Address']], src, n, {c: num(r[ix[c]]) for c in stall_cols}))
print(f"total warp instr {total:.4g}")
for op, n in ops.most_common(30): print(f"  {op:12s} {n:12.4g} {100*n/total:5.1f}%")
st = sum(stalls.values())
print("stalls (all samples):")
for c, n in stalls.most_common(12): print(f"  {c:24s} {100*n/st:5.1f}%")
print("top stalled instructions:")
for s, a, src, n, d in sorted(per_instr, reverse=True)[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    top = sorted(d.items(), key=lambda kv: -kv[1])[:2]
    print(f"  {100*s/st:5.2f}% {a} {src[:60]:60s} n={n:.3g} {[(k[6:], round(100*v/st,2)) for k,v in top]}")
