"""f1: 100k random pairs of strided layouts: `_between_each_other` never calls apart two that share a byte (seeds 1 and 7)."""
import random, itertools
from cuda_agent.evaluation.judge import _between_each_other
from cuda_agent.backends.sharing import layout_extent
def bytes_of(start, shape, strides, es):
    s=set()
    for idx in itertools.product(*[range(d) for d in shape]):
        o=start+sum(i*st for i,st in zip(idx,strides))*es
        s.update(range(o,o+es))
    return s
rng=random.Random(7); bad=0
for it in range(40000):
    es=rng.choice([1,2,4,8])
    def lay():
        nd=rng.randint(1,4)
        shape=[rng.randint(1,4) for _ in range(nd)]
        strides=[rng.choice([rng.randint(0,12), rng.randint(0,64), 1, 2]) for _ in range(nd)]
        return shape,strides
    (sa,ta),(sb,tb)=lay(),lay()
    es2=rng.choice([1,2,4,8])
    a0=rng.randint(0,64); b0=rng.randint(0,64)
    da={"dtype":{1:"uint8",2:"int16",4:"float32",8:"float64"}[es],"shape":sa,"strides":ta}
    db={"dtype":{1:"uint8",2:"int16",4:"float32",8:"float64"}[es2],"shape":sb,"strides":tb}
    ea=layout_extent(da)[4]; eb=layout_extent(db)[4]
    A=(a0,a0+ea,da,0); B=(b0,b0+eb,db,0)
    if _between_each_other(A,B):
        if bytes_of(a0,sa,ta,es) & bytes_of(b0,sb,tb,es2):
            bad+=1
            if bad<6: print("MISS", A, B)
print("bad", bad)
