#!/usr/bin/env python3
"""A protocol model of the attention skeleton's synchronisation (device/solder/attention/sm90_attention.cuh)
with staggered consumers (Config's Stagger): the producer thread (Q buffers, K and V rings on full/empty
mbarriers with parity waits), two consumer warpgroups on the turn ring of named barriers (consumer 1
passes its first L turns, consumer 0 ends with L empty turns) and their releases, under random
interleavings and random key tiles per work tile (0 included). It reports deadlocks and a second arrival
on a named barrier before its wait (which would break bar.sync's pairing), and checks that exactly the
configurations config.cuh's static_assert admits are free of both: L <= Stages - 1, and L <= 3 with two
Q buffers (1 with one). Products complete at once in the model: their latency adds waits, no new
dependency.

With dynamic=True the model adds Config's Dynamic work ring (the producer posts each work tile's entry
into two slots on work_full / work_empty, every consumer warp reads it; the entry after a tile is posted
once that tile's loads are issued, the sentinel after the last): the model finds the deadlock of Dynamic
with Stagger on work tiles without key tiles (which config.cuh refuses). With free=True the consumers take
no turns (Config's FreeConsumers: each issues as soon as its own operands are there, so the two drift
apart by up to the ring's depth), checked free of deadlock with and without the work ring at every depth
and Q buffer count. With early=True each consumer takes the next entry before its epilogue instead of
after it (Config's PostedWork), checked free of deadlock with turns and free consumers at every depth and
Q buffer count. With late_q=True each consumer releases its Q buffer after its epilogue instead of after
its last S (Config's QRowsEpilogue: the staged epilogue in the consumer's own Q rows on persistent
blocks): with turns free of deadlock exactly for L <= 2 with two Q buffers and L = 0 with one (and L <=
Stages - 1), the bound config.cuh's static_assert admits; with free consumers and the work ring (Dynamic,
PostedWork) at every depth and Q buffer count. Usage: stagger_model.py (exit status 1 on a mismatch).
"""
import random, sys, itertools

class Deadlock(Exception): pass

def run(counts, S, QB, L, seed, wgmma_async=True, dynamic=False, free=False, early=False, late_q=False):
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
    for s in range(2):
        init(('wf', s), 1); init(('we', s), 8)
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
    posted = [0]
    def post():
        slot = posted[0] & 1; ph = (posted[0] >> 1) & 1
        yield from gen_wait(lambda: parity_done(('we', slot), ph ^ 1))
        arrive(('wf', slot)); posted[0] += 1
    def producer():
        loaded = 0; qloads = 0
        if dynamic: yield from post()  # the first tile's entry
        for cnt in counts:
            if cnt <= 0:
                if dynamic: yield from post()  # the next entry (or the sentinel)
                continue
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
            if dynamic: yield from post()  # the next entry (or the sentinel)
    def consumer(c):
        my = 1 + c; nxt = 1 + (c + 1) % 2
        def sync():
            if free: return
            yield from gen_wait(lambda: tokens[my] > 0)
            tokens[my] -= 1
        def arr():
            if free: return
            tokens[nxt] += 1
            assert tokens[nxt] <= 1, 'double arrival on a named barrier'
        def rel(name):
            for w in range(4): arrive(name)
        taken = [0]
        def take():
            slot = taken[0] & 1; ph = (taken[0] >> 1) & 1
            yield from gen_wait(lambda: parity_done(('wf', slot), ph))
            rel(('we', slot)); taken[0] += 1
        if c == 1:
            arr()
            for _ in range(L):
                yield from sync(); arr(); yield 'step'
        consumed = 0; quses = 0
        if dynamic: yield from take()
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
                if cnt == 1 and not late_q: rel(('qe', qb))
                for n in range(1, cnt):
                    ks = (first + n) % S; vs = (first + n - 1) % S
                    u = first + n
                    yield from gen_wait(lambda: parity_done(('kf', ks), (u // S) & 1))
                    yield from sync()
                    yield from gen_wait(lambda: parity_done(('vf', vs), ((u - 1) // S) & 1))
                    arr(); yield 'step'
                    rel(('ke', ks))
                    if n == cnt - 1 and not late_q: rel(('qe', qb))
                    rel(('ve', vs))
                vs = (first + cnt - 1) % S; u = first + cnt - 1
                yield from gen_wait(lambda: parity_done(('vf', vs), (u // S) & 1))
                yield from sync(); arr(); yield 'step'
                rel(('ve', vs))
                consumed += cnt
            if dynamic and early: yield from take()  # PostedWork: the next entry before the epilogue
            yield 'epilogue'
            if late_q and cnt > 0: rel(('qe', qb))  # QRowsEpilogue: Q's rows held the staged output
            if dynamic and not early: yield from take()  # the next entry (the last take reads the sentinel)
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

def trials(S, QB, L, **kind):
    """None when 60 random runs pass, else (counts, error) of the first that fails."""
    for trial in range(60):
        rnd = random.Random(trial)
        n = rnd.randint(0, 7)
        counts = [rnd.choice([0, 1, 1, 2, 3, 5, 8, 9]) for _ in range(n)]
        try:
            run(counts, S, QB, L, trial, **kind)
        except (Deadlock, AssertionError) as e:
            return (counts, repr(e))
    return None

bad = 0
# Dynamic's work ring: with turns and no stagger free of deadlock; with a stagger it deadlocks (the
# eleventh session's hang; config.cuh refuses Dynamic with Stagger).
for S in (2, 4, 6):
    for QB in (1, 2):
        why = trials(S, QB, 0, dynamic=True)
        if why:
            print('dynamic S', S, 'QB', QB, 'L 0 deadlocks', why); bad += 1
if trials(4, 2, 2, dynamic=True) is None:
    print('dynamic with stagger 2: the model finds no deadlock (the device test hung there)'); bad += 1
# Free consumers (no turns), with and without the work ring: free of deadlock at every depth.
for S in range(2, 9):
    for QB in (1, 2):
        for dynamic in (False, True):
            why = trials(S, QB, 0, dynamic=dynamic, free=True)
            if why:
                print('free S', S, 'QB', QB, 'dynamic', dynamic, 'deadlocks', why); bad += 1
# PostedWork: the next entry taken before the epilogue, with turns and free: free of deadlock everywhere.
for S in range(2, 9):
    for QB in (1, 2):
        for free in (False, True):
            why = trials(S, QB, 0, dynamic=True, free=free, early=True)
            if why:
                print('posted work S', S, 'QB', QB, 'free', free, 'deadlocks', why); bad += 1
# QRowsEpilogue: each consumer releases its Q buffer after its epilogue (the staged output went through
# its Q rows) instead of after its last S. Consumer 0 may wait for the next tile's Q while consumer 1,
# L turns behind, has not yet reached the epilogue of the tile whose buffer that Q needs: free of
# deadlock for L <= 2 with two Q buffers and L = 0 with one (and L <= S - 1), with turns; free consumers
# and the work ring (Dynamic, PostedWork) with two Q buffers at every depth.
for S in range(2, 9):
    for QB in (1, 2):
        for L in range(0, S + 1):
            ok = trials(S, QB, L, late_q=True) is None
            allowed = L <= S - 1 and L <= (2 if QB == 2 else 0)
            if ok != allowed:
                print('late Q S', S, 'QB', QB, 'L', L, 'ok', ok, 'allowed', allowed); bad += 1
        for dynamic, free, early in ((False, True, False), (True, False, False), (True, True, True), (True, False, True)):
            why = trials(S, QB, 0, dynamic=dynamic, free=free, early=early, late_q=True)
            if why:
                print('late Q S', S, 'QB', QB, 'dynamic', dynamic, 'free', free, 'early', early, 'deadlocks', why); bad += 1
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
