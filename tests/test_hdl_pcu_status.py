# amaranth: UnusedElaboratable=no
"""The PCU's status outputs against their definitions (:mod:`stepforge.hdl.unit`).

A PCU takes its inputs in lock step: every input is needed for every beat, so while the stream
lasts ``stall_in`` is exactly "some input offers no beat" (a PCU that counts, say, only cycles in
which *no* input offers one passed every other test). ``stall_out`` is exactly "``out`` offers a
beat that is not taken", and ``busy`` is high whenever a port offers a beat. Runs with several
inputs under independent random ``valid`` patterns and random back-pressure, with one cycle per
beat and with several (``ii > 1``, the inputs held while the beat is computed).
"""

import random

import numpy as np
import pytest

from stepforge.compiler import functions as F
from stepforge.compiler.types import Tile, int8, int32
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import from_nested
from stepforge.hdl.pcu import PCU

from .port_trace import pattern, trace

T = Tile(int8, 2, 2)


def units():
    """PCUs with two or three lock-step inputs: (name, factory)."""
    return {
        "map_add": lambda: PCU(F.function(lambda a, b: a + b), [T, T], 1, lanes=4),      # ii 1
        "map_slow": lambda: PCU(F.function(lambda a, b, c: a * b - c), [T, T, T], 1,
                                lanes=1),                                                 # ii > 1
        "mac": lambda: PCU(F.function(lambda acc, a, w: acc + F.matmul(a, w)), [T, T], 2,
                           mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1, multipliers=2),
    }


def streams(rng, pcu):
    """One ragged rank-``pcu.rank`` stream per input, all of one structure (lock step)."""
    def tile():
        return np.array(rng.sample(range(-20, 20), 4), np.int8).reshape(2, 2)

    def nest(depth):
        if depth == 0:
            return None
        return [nest(depth - 1) for _ in range(rng.randrange(5))]
    shape = [nest(pcu.rank) for _ in range(rng.randrange(3, 6))]

    def fill(s):
        return tile() if s is None else [fill(x) for x in s]
    return [from_nested(fill(shape), pcu.rank) for _ in pcu.in_types]


def run(name, seed):
    pcu = units()[name]()
    rng = random.Random(seed)
    inputs = {f"in{k}": (beat_layout(t, pcu.rank), s)
              for k, (t, s) in enumerate(zip(pcu.in_types, streams(rng, pcu)))}
    valid = {n: pattern(0.6, 10 * seed + k, 4000) for k, n in enumerate(inputs)}
    ready = {"out": pattern(0.6, 10 * seed + 9, 4000)}
    tr = trace(pcu, inputs, {"out": beat_layout(pcu.out_type, pcu.out_rank)}, valid=valid,
               ready=ready, tail=6)
    return tr, list(inputs)


@pytest.mark.parametrize("name", sorted(units()))
@pytest.mark.parametrize("seed", range(3))
def test_status_follows_its_definition_while_the_stream_lasts(name, seed):
    tr, inputs = run(name, seed)
    lasting = [c for c in range(tr.cycles) if all(tr.left[i][c] for i in inputs)]
    assert lasting and any(0 < sum(tr.valid[i][c] for i in inputs) < len(inputs) for c in lasting)
    for c in range(tr.cycles):
        st = {k: v[c] for k, v in tr.status.items()}
        assert st["error"] == 0
        assert st["stall_out"] == (tr.valid["out"][c] and not tr.ready["out"][c]), c
        if any(tr.valid[p][c] for p in inputs + ["out"]):
            assert st["busy"], f"cycle {c}: a beat is offered but the PCU is not busy"
        if c in lasting:
            missing = not all(tr.valid[i][c] for i in inputs)
            assert st["stall_in"] == missing, f"cycle {c}: stall_in {st['stall_in']}, " \
                                              f"inputs valid {[tr.valid[i][c] for i in inputs]}"


def test_no_stall_in_after_the_stream():
    tr, inputs = run("map_add", 0)
    end = tr.last_cycle("out")
    assert [tr.status["stall_in"][c] for c in range(end + 1, tr.cycles)] == \
        [0] * (tr.cycles - end - 1)
