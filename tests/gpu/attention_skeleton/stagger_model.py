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
Q buffer count. With qrows=True the staged epilogue runs in each consumer's own Q rows (Config's
QRowsEpilogue): a full/empty pair per consumer's rows, each consumer releases its rows after its epilogue,
and with one Q buffer the producer issues a tile's first min(Stages, key tiles) K/V loads before it waits
for those releases; checked free of deadlock with turns and free consumers, with and without the work
ring and PostedWork, at every depth and Q buffer count. Usage: stagger_model.py (exit status 1 on a
mismatch).
"""
import random, sys, itertools

class Deadlock(Exception): pass

def run(counts, S, QB, L, seed, wgmma_async=True, dynamic=False, free=False, early=False, qrows=False):
    rnd = random.Random(seed)
    # mbarrier model: completed phases count
    full = {}  # name -> completed phases; arrivals in current phase
    arrivals = {}
    expected = {}
    def init(name, n):
        full[name] = 0; arrivals[name] = 0; expected[name] = n
    parts = 2 if qrows else 1  # Q's mbarrier pairs per buffer (QRowsEpilogue: one per consumer)
    for b in range(QB):
        for part in range(parts):
            init(('qf', b, part), 1); init(('qe', b, part), 8 // parts)
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
            def load_kv():
                nonlocal loaded
                st = loaded % S; ph = (loaded // S) & 1
                yield from gen_wait(lambda: parity_done(('ke', st), ph ^ 1))
                arrive(('kf', st)); yield 'step'
                yield from gen_wait(lambda: parity_done(('ve', st), ph ^ 1))
                arrive(('vf', st)); yield 'step'
                loaded += 1
            early_n = min(S, cnt) if qrows and QB == 1 else 0
            for n in range(early_n):
                yield from load_kv()
            qb = qloads % QB; ph = (qloads // QB) & 1
            for part in range(parts):
                yield from gen_wait(lambda: parity_done(('qe', qb, part), ph ^ 1))
                arrive(('qf', qb, part)); yield 'step'
            qloads += 1
            for n in range(early_n, cnt):
                yield from load_kv()
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
        part = c if qrows else 0
        def rel_q(qb):
            if qrows:
                rel(('qe', qb, part))
            else:
                for p in range(parts): rel(('qe', qb, p))
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
                yield from gen_wait(lambda: parity_done(('qf', qb, part), (quses // QB) & 1))
                quses += 1
                ks = first % S
                yield from gen_wait(lambda: parity_done(('kf', ks), (first // S) & 1))
                yield from sync(); arr(); yield 'step'
                rel(('ke', ks))
                if cnt == 1 and not qrows: rel_q(qb)
                for n in range(1, cnt):
                    ks = (first + n) % S; vs = (first + n - 1) % S
                    u = first + n
                    yield from gen_wait(lambda: parity_done(('kf', ks), (u // S) & 1))
                    yield from sync()
                    yield from gen_wait(lambda: parity_done(('vf', vs), ((u - 1) // S) & 1))
                    arr(); yield 'step'
                    rel(('ke', ks))
                    if n == cnt - 1 and not qrows: rel_q(qb)
                    rel(('ve', vs))
                vs = (first + cnt - 1) % S; u = first + cnt - 1
                yield from gen_wait(lambda: parity_done(('vf', vs), (u // S) & 1))
                yield from sync(); arr(); yield 'step'
                rel(('ve', vs))
                consumed += cnt
            if dynamic and early: yield from take()  # PostedWork: the next entry before the epilogue
            yield 'epilogue'
            if qrows and cnt > 0: rel_q(qb)  # QRowsEpilogue: this consumer's rows after its epilogue
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
# QRowsEpilogue: the epilogue in the Q rows (per-consumer Q parts released after it, the first K/V loads
# before Q with one buffer): free of deadlock with turns and free consumers, with and without the work
# ring and PostedWork, at every depth and Q buffer count.
for S in range(2, 9):
    for QB in (1, 2):
        for free in (False, True):
            for dynamic, early in ((False, False), (True, False), (True, True)):
                why = trials(S, QB, 0, dynamic=dynamic, free=free, early=early, qrows=True)
                if why:
                    print('q rows S', S, 'QB', QB, 'free', free, 'dynamic', dynamic, 'early', early, 'deadlocks', why); bad += 1
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
