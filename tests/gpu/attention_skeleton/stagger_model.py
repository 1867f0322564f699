#!/usr/bin/env python3
"""A protocol model of the attention skeleton's synchronisation (device/solder/attention/sm90_attention.cuh)
with staggered consumers (Config's Stagger): the producer thread (Q buffers, K and V rings on full/empty
mbarriers with parity waits), two consumer warpgroups on the turn ring of named barriers (consumer 1
passes its first L turns, consumer 0 ends with L empty turns) and their releases, under random
interleavings and random key tiles per work tile (0 included). It reports deadlocks and a second arrival
on a named barrier before its wait (which would break bar.sync's pairing), and checks that exactly the
configurations config.cuh's static_assert admits are free of both: L <= Stages - 1, and L <= 3 with two
Q buffers (1 with one). Products complete at once in the model: their latency adds waits, no new
dependency. Usage: stagger_model.py (exit status 1 on a mismatch).
"""
import random, sys, itertools

class Deadlock(Exception): pass

def run(counts, S, QB, L, seed, wgmma_async=True):
    rnd = random.Random(seed)
    # mbarrier model: completed phases count
    full = {}  # name -> completed phases; arrivals in current phase
    arrivals = {}
    expected = {}
    def init(name, n):
        full[name] = 0; arrivals[name] = 0; expected[name] = n
    for b in range(QB):
        init(('qf', b), 1); init(('qe', b), 8)
    for s in range(S):
        for k in ('kf', 'vf'): init((k, s), 1)
        for k in ('ke', 've'): init((k, s), 8)
    def arrive(name, n=1):
        arrivals[name] += n
        assert arrivals[name] <= expected[name]
        if arrivals[name] == expected[name]:
            full[name] += 1; arrivals[name] = 0
    def parity_done(name, parity):
        # try_wait.parity(p): true when the phase with parity p has completed, i.e. current phase parity != p
        return (full[name] & 1) != parity
    # named barriers: tokens
    tokens = {1: 0, 2: 0}
    def gen_wait(cond):
        while not cond():
            yield 'blocked'
    def producer():
        loaded = 0; qloads = 0
        for cnt in counts:
            if cnt <= 0: continue
            qb = qloads % QB; ph = (qloads // QB) & 1
            yield from gen_wait(lambda: parity_done(('qe', qb), ph ^ 1))
            arrive(('qf', qb)); qloads += 1
            for n in range(cnt):
                st = loaded % S; ph = (loaded // S) & 1
                yield from gen_wait(lambda: parity_done(('ke', st), ph ^ 1))
                arrive(('kf', st)); yield 'step'
                yield from gen_wait(lambda: parity_done(('ve', st), ph ^ 1))
                arrive(('vf', st)); yield 'step'
                loaded += 1
    def consumer(c):
        my = 1 + c; nxt = 1 + (c + 1) % 2
        def sync():
            yield from gen_wait(lambda: tokens[my] > 0)
            tokens[my] -= 1
        def arr():
            tokens[nxt] += 1
            assert tokens[nxt] <= 1, 'double arrival on a named barrier'
        def rel(name):
            for w in range(4): arrive(name)
        if c == 1:
            arr()
            for _ in range(L):
                yield from sync(); arr(); yield 'step'
        consumed = 0; quses = 0
        for cnt in counts:
            if cnt > 0:
                first = consumed
                qb = quses % QB
                yield from gen_wait(lambda: parity_done(('qf', qb), (quses // QB) & 1))
                quses += 1
                ks = first % S
                yield from gen_wait(lambda: parity_done(('kf', ks), (first // S) & 1))
                yield from sync(); arr(); yield 'step'
                rel(('ke', ks))
                if cnt == 1: rel(('qe', qb))
                for n in range(1, cnt):
                    ks = (first + n) % S; vs = (first + n - 1) % S
                    u = first + n
                    yield from gen_wait(lambda: parity_done(('kf', ks), (u // S) & 1))
                    yield from sync()
                    yield from gen_wait(lambda: parity_done(('vf', vs), ((u - 1) // S) & 1))
                    arr(); yield 'step'
                    rel(('ke', ks))
                    if n == cnt - 1: rel(('qe', qb))
                    rel(('ve', vs))
                vs = (first + cnt - 1) % S; u = first + cnt - 1
                yield from gen_wait(lambda: parity_done(('vf', vs), (u // S) & 1))
                yield from sync(); arr(); yield 'step'
                rel(('ve', vs))
                consumed += cnt
            yield 'epilogue'
        if c == 0:
            for _ in range(L):
                yield from sync(); arr(); yield 'step'
            yield from sync()
    procs = {'p': producer(), 'c0': consumer(0), 'c1': consumer(1)}
    state = {k: None for k in procs}
    steps = 0
    while procs:
        progressed = False
        order = list(procs); rnd.shuffle(order)
        for name in order:
            g = procs[name]
            try:
                r = next(g)
            except StopIteration:
                del procs[name]; progressed = True; continue
            if r != 'blocked': progressed = True
        steps += 1
        if not progressed:
            # check whether everything blocked: try each once more
            allblocked = True
            for name, g in list(procs.items()):
                try:
                    r = next(g)
                except StopIteration:
                    del procs[name]; allblocked = False; continue
                if r != 'blocked': allblocked = False
            if allblocked and procs:
                raise Deadlock(str(list(procs)))
        if steps > 10**6: raise Deadlock('too long')
    assert tokens[1] == 0 and tokens[2] == 0, tokens

bad = 0
for S in range(2, 9):
    for QB in (1, 2):
        for L in range(0, S + 1):
            ok = True
            for trial in range(60):
                rnd = random.Random(trial)
                n = rnd.randint(0, 7)
                counts = [rnd.choice([0, 1, 1, 2, 3, 5, 8, 9]) for _ in range(n)]
                try:
                    run(counts, S, QB, L, trial)
                except (Deadlock, AssertionError) as e:
                    ok = False; why = (counts, repr(e)); break
            allowed = L <= S - 1 and L <= (3 if QB == 2 else 1)
            if ok != allowed:
                print('S', S, 'QB', QB, 'L', L, 'ok', ok, 'allowed', allowed, why if not ok else '')
                bad += 1
print('stagger_model: %d mismatches between the model and the Config bound' % bad)
sys.exit(1 if bad else 0)
