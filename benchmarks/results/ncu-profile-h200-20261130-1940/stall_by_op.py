import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1]))); hdr = rows[1]; ix = {h: i for i, h in enumerate(hdr)}
def num(s):
    try: return float(s.replace(',', ''))
    except: return 0.0
cols = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
tot = collections.Counter(); byop = collections.defaultdict(collections.Counter)
for r in rows[2:]:
    if len(r) < len(hdr): continue
    src = r[ix['Source']].strip(); t = src.split()
    op = (t[1] if t and t[0].startswith('@') else (t[0] if t else '?')).split('.')[0]
    for c in cols:
        v = num(r[ix[c]]); tot[c] += v; byop[c][op] += v
T = sum(tot.values())
for c in sys.argv[2].split(','):
    print(c, f"{100*tot[c]/T:.1f}%:", ', '.join(f"{o} {100*v/T:.1f}" for o, v in byop[c].most_common(8)))
