import math
cfg={64:(3,128),128:(2,176),256:(2,80)}
for d,(wgs,BN) in cfg.items():
    BM=64*wgs
    for S in (512,1024,2048,8192):
        full=trim=trim1=0; zero=0
        for m in range(math.ceil(S/BM)):
            last=min(S,(m+1)*BM); nb=math.ceil(last/BN)
            for w in range(wgs):
                r0=m*BM+w*64; r1=min(S,r0+64)
                if r0>=S: continue
                for n in range(nb):
                    need=max(0,min(BN,r1-n*BN))
                    full+=BN; t=16*math.ceil(need/16); trim+=t
                    trim1+= t if n==nb-1 else BN
                    zero+= (n==nb-1 and need==0)
        print(f"d{d} S{S}: all masked blocks {trim/full:.3f}  first block only {trim1/full:.3f}  wg-blocks with 0 cols {zero}")
