"""The PMU's block allocator (``mode="dynamic"``): bounded dynamic buffers in linked blocks.

A buffer takes blocks from the free list as it grows; running out of blocks stalls the writer
(back-pressure) and never loses a beat; a buffer over its declared bound raises ``OVER_BOUND``
however many blocks are free; every block returns to the free list after the last replay.
"""

import math

from hypothesis import given, settings, strategies as st

from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import from_beats, from_nested, to_beats
from stepforge.hdl.pmu import PMU, Replay
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_memory import bufferize, check_buffer, streamify

from .test_hdl_pmu import ELEM, FIN_LAYOUT, TILES, Loop, Make, assert_clean, assert_tokens, \
    run_beats, run_loop, tile


@st.composite
def bounded_cases(draw):
    """Buffers of random bounds, with fibres of random sizes within them; few blocks."""
    b = draw(st.integers(1, 2))
    rank = b + draw(st.integers(0, 1))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=b, max_size=b)))
    buffer = st.lists(TILES, max_size=shape[-1])
    for k in range(1, b):
        buffer = st.lists(buffer, max_size=shape[b - 1 - k])
    if rank == b:
        tensors = draw(st.lists(buffer, max_size=4))
    else:
        tensors = draw(st.lists(st.lists(buffer, max_size=3), max_size=3))
    block_size = draw(st.integers(1, 4))
    need = -(-math.prod(shape) // block_size)
    make = Make(ELEM, rank, b, shape, mode="dynamic", block_size=block_size,
                blocks=draw(st.integers(need, need + 1)),
                readers=[Replay(draw(st.sampled_from([None, 2])))])
    return make, from_nested(tensors, rank)


@settings(deadline=None, max_examples=25)
@given(bounded_cases(), st.floats(0.5, 1.0), st.floats(0.2, 1.0), st.integers(0, 2**16))
def test_bounded_dynamic_buffers_match_interpreter(case, valid_p, ready_p, seed):
    make, tokens = case
    pmu = make()
    refs = bufferize(tokens, pmu.b, shape=pmu.shape)  # within the bounds: no error
    for r in refs:
        if hasattr(r, "tokens"):
            check_buffer(r.tokens, pmu.shape)
    run = run_loop(pmu, tokens, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert_tokens(run.outputs["out"], streamify(refs, pmu.b, repeat=pmu.readers[0].repeat))
    assert_clean(run, pmu, tokens)  # every block back in the free list


def test_running_out_of_blocks_stalls_the_writer():
    """Blocks for one full buffer only: the writer waits for each buffer to be freed."""
    tensors = [[tile(i)] * n for i, n in enumerate([4, 3, 1, 4, 2, 4])]
    tokens = from_nested(tensors, 1)
    pmu = PMU(ELEM, 1, 1, (4,), mode="dynamic", block_size=2, blocks=2, readers=[Replay(2)])
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 1), to_beats(tokens))},
                    {"out": beat_layout(ELEM, 2), "fin": FIN_LAYOUT}, 200,
                    ready=lambda port, cyc: cyc % 3 == 0, sample=("free_blocks",))
    assert res["error"] == 0 and len(res["in"]["in0"]) == 18
    assert_tokens(from_beats([bt for _, bt in res["out"]["out"]]),
                  streamify(bufferize(tokens, 1), 1, repeat=2))
    free = res["samples"]["free_blocks"]
    assert min(free) == 0 and free[-1] == 2
    taken = res["in"]["in0"]
    assert taken[-1] - taken[0] > 60  # held back by the slow reader, not by the input
    assert res["out"]["fin"][0][1].data == 2


def test_free_blocks_follow_allocation():
    """Three 4-tile buffers in 2-tile blocks use 6 of 8 blocks until the first is released."""
    tokens = from_nested([[tile(i)] * 4 for i in range(3)], 1)
    pmu = PMU(ELEM, 1, 1, (4,), mode="dynamic", block_size=2, blocks=8)
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 1), to_beats(tokens))},
                    {"out": beat_layout(ELEM, 1), "fin": FIN_LAYOUT}, 60,
                    ready=lambda port, cyc: cyc >= 30, sample=("free_blocks",))
    free = res["samples"]["free_blocks"]
    # one block per two tiles, from the cycle after the first beat (the write side's queue)
    assert free[:3] == [8, 8, 7] and free[3] == 7 and free[4] == 6
    # all three written by cycle 12; the first buffer's four tiles fit the replay engine's four
    # places (its stages and output queue), so it is read out and released while the reader is
    # still held: its two blocks are free again from cycle 15
    assert free[12] == 2 == min(free) and free[15] == free[29] == 4
    assert free[-1] == 8 and res["error"] == 0
    assert_tokens(from_beats([bt for _, bt in res["out"]["out"]]), tokens)


def test_over_bound_with_blocks_to_spare():
    """A buffer over its bound is an error even though the free list could hold it."""
    tokens = from_nested([[tile(1)] * 2, [tile(2)] * 3], 1)
    pmu = PMU(ELEM, 1, 1, (2,), mode="dynamic", block_size=1, blocks=16)
    run = run_loop(pmu, tokens)
    assert run.error == 1 and run.code == ErrorCode.OVER_BOUND
    assert run.accepted["in0"] == 5  # the third tile of the second buffer is taken and flagged
