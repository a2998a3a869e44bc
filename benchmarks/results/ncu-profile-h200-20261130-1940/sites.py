import csv, sys
rows = list(csv.reader(open(sys.argv[1]))); hdr = rows[1]; ix = {h: i for i, h in enumerate(hdr)}
ops = sys.argv[2].split(',')
def num(s):
    try: return float(s.replace(',', ''))
    except: return 0.0
tot = sum(num(r[ix['Instructions Executed']]) for r in rows[2:] if len(r) >= len(hdr))
for r in rows[2:]:
    if len(r) < len(hdr): continue
    src = r[ix['Source']].strip(); n = num(r[ix['Instructions Executed']])
    toks = src.split(); op = toks[1] if toks and toks[0].startswith('@') else (toks[0] if toks else '')
    if op.split('.')[0] in ops and n > float(sys.argv[3]):
        print(f"{r[ix['Address']][-5:]} {n:10.3g} {src[:90]}")
