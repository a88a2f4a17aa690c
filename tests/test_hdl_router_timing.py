# amaranth: UnusedElaboratable=no
"""The routers under random back-pressure: throughput against a stated bound, and the status.

**Throughput.** With every input always offering its next beat and every output ``ready`` drawn
at random each cycle (a fixed, seeded pattern), each router must move its beats no later than an
*ideal eager fork* would under the very same pattern: the beats go out one after another, beat
``j`` is offered from the cycle after beat ``j - 1`` is done, each output that gets it takes it
in its first ready cycle from then on, independently of the others, and the beat is done when
the last of them has taken it. This is the timing every router documents (one beat per cycle,
0 extra cycles per chunk, outputs never waiting for each other); Broadcast's bound is the same
with a ``depth``-entry FIFO per output. A router that re-couples its outputs (a fork that waits
for every output's ``ready`` in one cycle, even after some output took the beat) falls far
behind the bound: about half as many cycles again at ``ready`` probability 0.5.

**Status** (the definitions of :mod:`stepforge.hdl.unit`): every cycle, ``stall_out`` is exactly
"some output offers a beat that is not taken"; ``stall_in`` is never high while every input that
still has beats offers one, and always high while none of them does; ``busy`` is high while any
port offers a beat; once every output has sent ``Done`` all three stay low. For the
single-input routers ``stall_in`` is exactly "``in0`` has beats left and offers none".
"""

import random

import pytest

from stepforge.compiler.types import Index, Select
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import from_nested, to_beats
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.sim.ref.ops_routing import reassemble

from .port_trace import pattern, trace

N = 3
DATA = beat_layout(Index(), 1)
SELECT = beat_layout(Select(N), 0)
OUTS = [f"out{i}" for i in range(N)]
INS = [f"in{j}" for j in range(N)]
CYCLES = 4000  # length of the ready/valid patterns (longer than any run)


def fibres(rng, count):
    """``count`` rank-1 fibres of 0..3 elements (empty ones are stop-only chunks)."""
    return [[rng.randrange(100) for _ in range(rng.randrange(4))] for _ in range(count)]


def masks_for(rng, streams):
    """Random selector masks that consume every stream's fibres exactly (Reassemble)."""
    left, masks = [len(s) for s in streams], []
    while any(left):
        mask = rng.randrange(1 << N) & sum(1 << j for j in range(N) if left[j])
        masks.append(mask)
        for j in range(N):
            left[j] -= mask >> j & 1
    return masks


def next_ready(ready, t):
    """The first cycle ``>= t`` in which ``ready`` is high."""
    while t < len(ready) and not ready[t]:
        t += 1
    return t


def eager_bound(moves, ready, start):
    """The cycle each move is done in an ideal eager fork (module doc).

    ``moves``: per beat, the set of output ports that take it (empty: the beat is dropped, done
    in the cycle it is offered); ``start``: the cycle the first beat is offered.
    """
    t, done = start, []
    for ports in moves:
        end = max((next_ready(ready[p], t) for p in ports), default=t)
        done.append(end)
        t = end + 1
    return done


def assert_within(taken, bound, what):
    late = [(k, t, b) for k, (t, b) in enumerate(zip(taken, bound)) if t > b]
    assert len(taken) == len(bound), (what, len(taken), len(bound))
    assert not late, f"{what}: beats later than the eager bound (beat, cycle, bound): {late[:5]}"


SEEDS = [(seed, p) for seed in range(3) for p in (0.3, 0.6)]


# -- throughput ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed, p", SEEDS)
def test_partition_fork_keeps_up_with_each_output(seed, p):
    rng = random.Random(seed)
    data = fibres(rng, 40)
    masks = [rng.randrange(1 << N) for _ in data]  # multi-hot (broadcast) and zero (drop) too
    ready = {o: pattern(p, 100 * seed + i, CYCLES) for i, o in enumerate(OUTS)}
    tr = trace(PartitionUnit(Index(), 1, N, 1),
               {"in0": (DATA, from_nested(data, 1)), "select": (SELECT, from_nested(masks, 0))},
               {o: DATA for o in OUTS}, ready=ready)
    moves = []
    for fibre, mask in zip(data, masks):
        moves += [{OUTS[i] for i in range(N) if mask >> i & 1}] * max(1, len(fibre))
    moves.append(set(OUTS))                       # the bare Done on every output
    bound = eager_bound(moves, ready, 1)          # the first selector element: one cycle
    # in0's final beat stays on in0 until every output has taken its Done
    assert_within(tr.taken["in0"], bound[:-2] + bound[-1:], "in0")
    assert max(tr.last_cycle(o) for o in OUTS) <= bound[-1]


@pytest.mark.parametrize("seed, p", SEEDS)
def test_parallelize_keeps_up_with_each_output(seed, p):
    rng = random.Random(seed)
    data = fibres(rng, 40)
    ready = {o: pattern(p, 100 * seed + i, CYCLES) for i, o in enumerate(OUTS)}
    tr = trace(ParallelizeUnit(Index(), 1, N, 1), {"in0": (DATA, from_nested(data, 1))},
               {o: DATA for o in OUTS}, ready=ready)
    moves = []
    for j, fibre in enumerate(data):
        moves += [{OUTS[j % N]}] * max(1, len(fibre))
    moves.append(set(OUTS))
    bound = eager_bound(moves, ready, 0)
    assert_within(tr.taken["in0"], bound[:-2] + bound[-1:], "in0")
    assert max(tr.last_cycle(o) for o in OUTS) <= bound[-1]


@pytest.mark.parametrize("seed, p", SEEDS)
def test_reassemble_moves_a_beat_in_every_ready_cycle(seed, p):
    rng = random.Random(seed)
    streams = [fibres(rng, rng.randrange(5, 15)) for _ in range(N)]
    masks = masks_for(rng, streams)
    ins = {name: (DATA, from_nested(s, 1)) for name, s in zip(INS, streams)}
    ins["select"] = (SELECT, from_nested(masks, 0))
    ready = {"out": pattern(p, seed, CYCLES)}
    tr = trace(ReassembleUnit(Index(), N, 1, 0), ins, {"out": beat_layout(Index(), 2)}, ready=ready)
    want = to_beats(reassemble([from_nested(s, 1) for s in streams], from_nested(masks, 0), 1))
    bound = eager_bound([{"out"}] * (len(want) + 1), ready, 1)  # and a bare Done
    assert_within([c for c, _ in tr.beats["out"]], bound, "out")


@pytest.mark.parametrize("seed, p", SEEDS)
def test_eager_merge_fork_keeps_up_with_data_and_select(seed, p):
    rng = random.Random(seed)
    streams = [fibres(rng, rng.randrange(3, 12)) for _ in range(N)]
    ready = {"data": pattern(p, seed, CYCLES), "select": pattern(p, seed + 1000, CYCLES)}
    tr = trace(EagerMergeUnit(Index(), N, 1),
               {name: (DATA, from_nested(s, 1)) for name, s in zip(INS, streams)},
               {"data": DATA, "select": SELECT}, ready=ready)
    # the chunks in the order the arbiter granted them (select names each chunk's input)
    moves, pos = [], [0] * N
    for _, beat in tr.beats["select"]:
        if beat.has_data:
            j = beat.data.bit_length() - 1
            size = max(1, len(streams[j][pos[j]]))
            pos[j] += 1
            moves += [{"data", "select"}] + [{"data"}] * (size - 1)
    assert pos == [len(s) for s in streams]
    moves.append({"data", "select"})
    bound = eager_bound(moves, ready, 0)
    assert_within(sorted(c for name in INS for c in tr.taken[name]), bound[:-1], "inputs")
    assert max(tr.last_cycle("data"), tr.last_cycle("select")) <= bound[-1]


def fifo_bound(n_beats, ready, depth):
    """Broadcast's bound: the cycle each input beat is taken with a ``depth``-entry FIFO per
    output (a beat is taken when every FIFO has room, and offered the next cycle)."""
    queues, taken, t = {o: [] for o in ready}, [], 0
    while len(taken) < n_beats:
        room = all(len(q) < depth for q in queues.values())
        for o, q in queues.items():
            if q and q[0] <= t and next_ready(ready[o], t) == t:
                q.pop(0)
        if room:
            for q in queues.values():
                q.append(t + 1)
            taken.append(t)
        t += 1
    return taken


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("seed, p", SEEDS)
def test_broadcast_lets_each_output_run_ahead_by_its_fifo(seed, p, depth):
    rng = random.Random(seed)
    data = from_nested(fibres(rng, 40), 1)
    ready = {o: pattern(p, 100 * seed + i, CYCLES) for i, o in enumerate(OUTS)}
    tr = trace(BroadcastUnit(Index(), 1, N, depth=depth), {"in0": (DATA, data)},
               {o: DATA for o in OUTS}, ready=ready)
    assert_within(tr.taken["in0"], fifo_bound(len(to_beats(data)), ready, depth), "in0")


# -- status ----------------------------------------------------------------------------------------

def routers(seed):
    """Every router with inputs for one run: (unit, inputs, outputs)."""
    rng = random.Random(seed)
    data = fibres(rng, 15)
    streams = [fibres(rng, rng.randrange(2, 6)) for _ in range(N)]
    many = {name: (DATA, from_nested(s, 1)) for name, s in zip(INS, streams)}
    return {
        "partition": (PartitionUnit(Index(), 1, N, 1),
                      {"in0": (DATA, from_nested(data, 1)),
                       "select": (SELECT, from_nested([rng.randrange(1 << N) for _ in data], 0))},
                      {o: DATA for o in OUTS}),
        "parallelize": (ParallelizeUnit(Index(), 1, N, 1), {"in0": (DATA, from_nested(data, 1))},
                        {o: DATA for o in OUTS}),
        "reassemble": (ReassembleUnit(Index(), N, 1, 0),
                       {**many, "select": (SELECT, from_nested(masks_for(rng, streams), 0))},
                       {"out": beat_layout(Index(), 2)}),
        "eager_merge": (EagerMergeUnit(Index(), N, 1), many, {"data": DATA, "select": SELECT}),
        "broadcast": (BroadcastUnit(Index(), 1, N), {"in0": (DATA, from_nested(data, 1))},
                      {o: DATA for o in OUTS}),
    }


def check_status(tr, inputs, outputs):
    """The status definitions of the module doc, every cycle of ``tr``."""
    end = max(tr.last_cycle(o) for o in outputs)
    for c in range(tr.cycles):
        st = {k: v[c] for k, v in tr.status.items()}
        assert st["error"] == 0
        assert st["stall_out"] == any(tr.valid[o][c] and not tr.ready[o][c] for o in outputs), c
        pending = [i for i in inputs if tr.left[i][c] > 0]
        offered = [i for i in pending if tr.valid[i][c]]
        if pending and len(offered) == len(pending):
            assert not st["stall_in"], f"cycle {c}: stall_in while every input offers a beat"
        if pending and not offered:
            assert st["stall_in"], f"cycle {c}: no stall_in while no input offers a beat"
        if len(inputs) == 1:
            assert st["stall_in"] == (bool(pending) and not offered), c
        if any(tr.valid[p][c] for p in list(inputs) + list(outputs)):
            assert st["busy"], f"cycle {c}: a beat is offered but the unit is not busy"
        if c > end:
            assert (st["busy"], st["stall_in"], st["stall_out"]) == (0, 0, 0), c


@pytest.mark.parametrize("name", ["partition", "parallelize", "reassemble", "eager_merge",
                                  "broadcast"])
@pytest.mark.parametrize("seed", range(3))
def test_status_follows_its_definition(name, seed):
    unit, inputs, outputs = routers(seed)[name]
    valid = {n: pattern(0.6, 10 * seed + k, CYCLES) for k, n in enumerate(inputs)}
    ready = {n: pattern(0.6, 10 * seed + 50 + k, CYCLES) for k, n in enumerate(outputs)}
    tr = trace(unit, inputs, outputs, valid=valid, ready=ready, tail=6)
    check_status(tr, inputs, outputs)
