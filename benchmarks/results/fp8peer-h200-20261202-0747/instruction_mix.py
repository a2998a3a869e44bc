"""Instruction mix per scored element of our FP8 d128 kernel and cuDNN's (ncu SASS pages of fp8peer-h200-20261202-0747, gunzipped
first); run in that folder."""
import csv,collections,sys
def load(p):
    lines=list(csv.reader(open(p)))
    h=lines[1]
    c=collections.Counter()
    for l in lines[2:]:
        if len(l)<len(h): continue
        d=dict(zip(h,l))
        w=d['Source'].split()
        if w and w[0].startswith('@'): w=w[1:]
        op=w[0].split('.')[0] if w else '?'
        try: n=float(d['Instructions Executed'].replace(',',''))
        except: n=0
        c[op]+=n
    return c
o=load('ours.sass.csv'); c=load('cudnn.sass.csv')
# warp iterations of the key loop (ours: 64 x 192 scores per warpgroup and block, cuDNN: 64 x 256) and scores per
# thread and iteration, from the per-instruction execution counts of the two SASS pages
it_o=1.398e6; it_c=1.05e6; el_o=96; el_c=128
tot_o=sum(o.values()); tot_c=sum(c.values())
print("total ours %.3g cudnn %.3g; per thread-element: ours %.2f cudnn %.2f"%(tot_o,tot_c,tot_o/it_o/el_o, tot_c/it_c/el_c))
ops=sorted(set(o)|set(c), key=lambda k:-(o[k]/it_o/el_o+c[k]/it_c/el_c))
for k in ops[:50]:
    print("%-12s ours %6.3f  cudnn %6.3f   per-iter ours %7.1f cudnn %7.1f"%(k,o[k]/it_o/el_o,c[k]/it_c/el_c,o[k]/it_o,c[k]/it_c))
