#!/usr/bin/env python3
"""A lane-by-lane model of gpu/graph/search_cuda.cu's drop_hopeless and merge_batch
(Spare: the grouped ranking and the full list's own bound, teams' CTAs only), checked against the exact merge.

Each warp's shuffles are modelled lane by lane (warp_sort's bitonic network, the
grouped rank counts), score_less's order (NaN last, ties by id), drop_hopeless's
compaction in a random order. Random cases: 128, 256 and 512 threads, ef 1-1024,
empty, partial and full lists, batches of 0 to blockDim, heavy ties and 5 % NaN
distances. A case passes when the merged list is exactly the ef best of list and
batch (ids and flags), every position written once and none at ef or beyond.
A model, not the kernel: keep it in step with the two functions by hand; the GPU
tests (GraphGpu.*EqualCpuSearch) are what decide.

    python3 bench/kernels/graph_merge_model.py     # "passed 6000 ..." or the failing case
Written in review (helper session, 2026-11-29).
"""
import random, math, functools
STATS={'own':0}
NAN=float('nan'); NONODE=0xffffffff
def less(da,ia,db,ib):
    na=da!=da; nb=db!=db
    if na!=nb: return nb
    if not na and da!=db: return da<db
    return ia<ib
def key(x):
    d,i=x
    return (1 if d!=d else 0, 0 if d!=d else d, i)
def bitonic_step(d,i,pd,pi,t,k,j):
    keep_less=((t&j)==0)==((t&k)==0)
    if (less(pd,pi,d,i) if keep_less else less(d,i,pd,pi)): return pd,pi
    return d,i
def warp_sort(D,I):  # lists of 32
    D=list(D);I=list(I)
    k=2
    while k<=32:
        m=k>>1
        while m>0:
            PD=[D[t^m] for t in range(32)];PI=[I[t^m] for t in range(32)]
            for t in range(32): D[t],I[t]=bitonic_step(D[t],I[t],PD[t],PI[t],t,k,m)
            m>>=1
        k<<=1
    return D,I
def drop_hopeless(sh,ef,nt,grouped):
    nb=sh['batch']; inn=sh['list'][sh['cur']]; full=sh['size']>=ef
    warps=nt//32; filled=max(1,min(warps,nb//32)); j=(ef+filled-1)//filled
    can_own=nb>32 and nb>=ef and j<=32
    if nb==0 or (not full and not can_own): return
    D=[sh['bd'][i] if i<nb else NAN for i in range(nt)]
    I=[sh['bid'][i] if i<nb else NONODE for i in range(nt)]
    td,tid=NAN,NONODE
    if full: td,tid=inn['d'][sh['size']-1],inn['id'][sh['size']-1]
    own=can_own and not full
    if can_own and full and grouped and nb*4>nt:
        own=sum(1 for i in range(nt) if i<nb and not less(td,tid,D[i],I[i]))*4>nt
    STATS['own']+=own
    if own:
        covering=min(warps,(nb-j)//32+1)
        gather=grouped and full and covering*j<=32 and covering*j>ef
        spare=sh['list'][sh['cur']^1]
        WD=[];WI=[]
        for w in range(warps):
            wd,wi=warp_sort(D[32*w:32*w+32],I[32*w:32*w+32])
            if gather and w<covering:
                for l in range(j): spare['d'][w*j+l]=wd[l]; spare['id'][w*j+l]=wi[l]
            WD.append(wd[j-1]);WI.append(wi[j-1])
        md=-math.inf;mid=0
        cand=[(WD[l],WI[l]) for l in range(covering)]
        for x in cand:
            if less(md,mid,x[0],x[1]): md,mid=x
        if gather:
            ud=[spare['d'][l] if l<covering*j else NAN for l in range(32)]
            ui=[spare['id'][l] if l<covering*j else NONODE for l in range(32)]
            ud,ui=warp_sort(ud,ui)
            md,mid=ud[ef-1],ui[ef-1]
        if covering*j>=ef and less(md,mid,td,tid): td,tid=md,mid
    keep=[i for i in range(nb) if not less(td,tid,D[i],I[i])]
    random.shuffle(keep)
    sh['bd'][:len(keep)]=[D[i] for i in keep]; sh['bid'][:len(keep)]=[I[i] for i in keep]
    sh['batch']=len(keep)
def rank_lanes(c,t):
    g=32
    while g>1 and (g*c>t or g//2>=c): g>>=1
    return g
def list_rank(inn,size,d,i):
    lo,hi=0,size
    while lo<hi:
        m=(lo+hi)//2
        if less(inn['d'][m],inn['id'][m],d,i): lo=m+1
        else: hi=m
    return lo
def merge(sh,ef,nt,writes,grouped):
    drop_hopeless(sh,ef,nt,grouped)
    nb=sh['batch']; size=sh['size']; inn=sh['list'][sh['cur']]; out=sh['list'][sh['cur']^1]
    for k in ('d','id','flag'): out[k]=[None]*len(out[k])
    def W(at,d,i,f):
        assert 0<=at<ef, at
        writes.append(at); out['d'][at]=d; out['id'][at]=i; out['flag'][at]=f
    srt=nb*4>nt if grouped else nb>32
    if srt:
        z=sorted(zip(sh['bd'][:nb],sh['bid'][:nb]),key=key)
        sh['bd'][:nb]=[a for a,b in z]; sh['bid'][:nb]=[b for a,b in z]
        for i in range(nb):
            at=i+list_rank(inn,size,sh['bd'][i],sh['bid'][i])
            if at<ef: W(at,sh['bd'][i],sh['bid'][i],0)
    elif nb>0:
        g=rank_lanes(nb,nt) if grouped else 1; assert g*nb<=nt
        r={}
        for t in range(nt):
            c=t//g
            if c<nb:
                r[c]=r.get(c,0)+sum(less(sh['bd'][jj],sh['bid'][jj],sh['bd'][c],sh['bid'][c]) for jj in range(t%g,nb,g))
        for t in range(nt):
            c=t//g
            if c<nb and t%g==0:
                d,i=sh['bd'][c],sh['bid'][c]
                at=r[c]+list_rank(inn,size,d,i)
                if at<ef: W(at,d,i,0)
        assert all(c in r for c in range(nb))
    if srt or nb==0 or size>nt:
        for i in range(size):
            d,idd=inn['d'][i],inn['id'][i]
            lo=sum(less(sh['bd'][jj],sh['bid'][jj],d,idd) for jj in range(nb))
            if i+lo<ef: W(i+lo,d,idd,inn['flag'][i])
    else:
        g=rank_lanes(size,nt) if grouped else 1; r={}
        for t in range(nt):
            e=t//g
            if e<size:
                d,idd=inn['d'][e],inn['id'][e]
                r[e]=r.get(e,0)+sum(less(sh['bd'][jj],sh['bid'][jj],d,idd) for jj in range(t%g,nb,g))
        for e in range(size):
            if e+r[e]<ef: W(e+r[e],inn['d'][e],inn['id'][e],inn['flag'][e])
    sh['size']=min(ef,size+nb); sh['cur']^=1; sh['batch']=0
def trial(rng):
    nt=rng.choice([128,256,512]); ef=rng.choice([1,2,3,5,8,15,16,17,31,32,33,48,64,100,128,200,513,1024])
    size=rng.choice([0,ef,ef,rng.randint(0,ef)])
    nb=min(nt,rng.choice([0,1,rng.randint(0,nt),nt,33,rng.randint(30,140),nt//4,nt//4+1]))
    vals=rng.choice([3,10,1000])
    ids=rng.sample(range(100000),size+nb)
    def dist():
        return NAN if rng.random()<0.05 else float(rng.randint(0,vals))
    L=sorted([(dist(),ids[k]) for k in range(size)],key=key)
    B=[(dist(),ids[size+k]) for k in range(nb)]
    flags=[rng.randint(0,1) for _ in range(size)]
    mk=lambda: {'d':[None]*1024,'id':[None]*1024,'flag':[None]*1024}
    cur=rng.randint(0,1); lists=[mk(),mk()]
    for k,(d,i) in enumerate(L): lists[cur]['d'][k]=d; lists[cur]['id'][k]=i; lists[cur]['flag'][k]=flags[k]
    sh={'list':lists,'cur':cur,'size':size,'batch':nb,'bd':[d for d,i in B]+[None]*(512-nb),'bid':[i for d,i in B]+[None]*(512-nb)}
    writes=[]
    grouped=nt==512 and rng.random()<0.75  # the kernel's Spare: teams' CTAs of 512
    merge(sh,ef,nt,writes,grouped)
    exp=sorted([(d,i,f) for (d,i),f in zip(L,flags)]+[(d,i,0) for d,i in B],key=lambda x:key(x[:2]))[:ef]
    o=sh['list'][sh['cur']]
    got=[(o['d'][k],o['id'][k],o['flag'][k]) for k in range(sh['size'])]
    ok= len(got)==len(exp) and all((a[1]==b[1] and a[2]==b[2]) for a,b in zip(got,exp)) and len(writes)==len(set(writes))==len(exp)
    if not ok:
        print('FAIL',nt,ef,size,nb); print(got[:10]); print(exp[:10]); return False
    return True
if __name__=="__main__":
  rng=random.Random(1)
  n=0
  for t in range(6000):
      if not trial(rng): break
      n+=1
  print("passed",n,STATS)
