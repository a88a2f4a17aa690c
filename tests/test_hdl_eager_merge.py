# amaranth: UnusedElaboratable=no
"""EagerMergeUnit against the reference interpreter (``check_eager_merge``: the order is timing's)."""

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import Index, Select
from stepforge.contract.beat import beat_layout, pack_beat, unpack_beat
from stepforge.contract.tokens import Beat, from_nested, to_beats
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.eager import check_eager_merge
from stepforge.sim.ref.ops_routing import eager_merge
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_partition import (ELEM, TILES, accepted_all, assert_tokens, beats_of, framed,
                                  frozen_after_fault, tok)
from .test_tokens import ragged


def run_merge(streams, b, *, bare=None, elem=ELEM, **kw):
    n = len(streams)
    bare = bare or [False] * n
    dut = EagerMergeUnit(elem, n, b)
    ins = {f"in{j}": (beat_layout(elem, b), framed(streams[j], bare[j])) for j in range(n)}
    outs = {"data": beat_layout(elem, b), "select": beat_layout(Select(n), 0)}
    return simulate(dut, ins, outs, **kw), ins


CASES = st.tuples(st.integers(1, 3), st.integers(0, 2)).flatmap(lambda nb: st.tuples(
    st.just(nb[1]),
    st.lists(ragged(nb[1], elems=TILES, max_size=3), min_size=nb[0], max_size=nb[0]),
    st.lists(st.booleans(), min_size=nb[0], max_size=nb[0])))


@settings(deadline=None, max_examples=30)
@given(CASES, st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, valid_p, ready_p, seed):
    b, tensors, bare = case
    streams = [from_nested(t, b) for t in tensors]
    run, ins = run_merge(streams, b, bare=bare, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert run.error == 0, ErrorCode(run.code)
    # every input's chunks, in order, attributed to it by the selector, bit for bit
    check_eager_merge(streams, run.outputs["data"], run.outputs["select"], b)
    assert accepted_all(run, ins)


# -- arbitration --------------------------------------------------------------------------------

def test_full_speed_order_is_the_interpreters_round_robin():
    # with every input always offering, round-robin from in0 is what the interpreter assumes
    streams = [tok("1 2 S1 3 S1 4 S1"), tok("5 S1"), tok("6 7 8 S1 S1 9 S1")]
    run, _ = run_merge(streams, 1, elem=Index())
    data, sel = eager_merge(streams, 1)
    assert run.outputs == {"data": data, "select": sel}
    assert sel == [1, 2, 4, 1, 4, 1, 4]


def test_first_ready_wins_and_round_robin_priority():
    """Driven by hand: the only offering input is granted in the same cycle; after it, the
    search starts at the next input, so a busy input cannot starve the others."""
    dut = EagerMergeUnit(Index(), 3, 0)
    lay = beat_layout(Index(), 0)
    sel_lay = beat_layout(Select(3), 0)
    log = []

    async def bench(ctx):
        ctx.set(dut.data.ready, 1)
        ctx.set(dut.select.ready, 1)

        def offer(j, value):
            ctx.set(getattr(dut, f"in{j}").valid, 1)
            ctx.set(Value.cast(getattr(dut, f"in{j}").payload),
                    pack_beat(lay, Beat(value, 1, 0, 0)))

        def granted():
            mask = unpack_beat(sel_lay, ctx.get(Value.cast(dut.select.payload))).data
            return ctx.get(dut.data.valid), mask

        offer(2, 20)  # in2 alone
        log.append(granted())
        await ctx.tick()
        for j, v in [(0, 10), (1, 11), (2, 21)]:  # then all three: in0 comes next (after in2)
            offer(j, v)
        for _ in range(3):
            log.append(granted())
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # in2 at once; then in0, in1, in2 (each input keeps offering, so this is round-robin)
    assert log == [(1, 4), (1, 1), (1, 2), (1, 4)]


@pytest.mark.parametrize("bare", [[True, False], [False, True], [True, True]])
def test_bare_done_on_inputs(bare):
    streams = [tok("1 2 S1 3 S1"), tok("4 S1")]
    run, ins = run_merge(streams, 1, bare=bare, elem=Index(), ready_p=0.6, seed=2)
    assert (beats_of(ins["in0"][1])[-1] == Beat(None, 0, 0, 1)) == bare[0]
    check_eager_merge(streams, run.outputs["data"], run.outputs["select"], 1)
    assert accepted_all(run, ins)
    assert run.beats["data"][-1] == run.beats["select"][-1] == Beat(None, 0, 0, 1)


def test_empty_inputs_and_empty_chunks():
    streams = [[], tok("S1 S1"), tok("1 S1")]  # no chunk; two empty chunks; one chunk
    run, _ = run_merge(streams, 1, elem=Index(), valid_p=0.5, ready_p=0.5, seed=7)
    check_eager_merge(streams, run.outputs["data"], run.outputs["select"], 1)
    assert sorted(run.outputs["select"]) == [2, 2, 4]


# -- run-time faults ----------------------------------------------------------------------------

@pytest.mark.parametrize("bare", [False, True])
def test_input_ends_inside_a_chunk(bare):
    run, _ = run_merge([tok("1 S1 2"), tok("3 S1")], 1, bare=[bare, False], elem=Index())
    assert run.error == 1 and ErrorCode(run.code) == ErrorCode.EARLY_END


def test_nothing_moves_after_a_fault():
    frozen_after_fault(EagerMergeUnit(Index(), 2, 1),
                       {"in0": (beat_layout(Index(), 1), tok("1 S1 2")),
                        "in1": (beat_layout(Index(), 1), tok("3 S1"))},
                       {"data": beat_layout(Index(), 1), "select": beat_layout(Select(2), 0)})


def test_stop_above_rank():
    run, _ = run_merge([tok("1 S2"), tok("2 S3")], 2, elem=Index())
    assert run.error == 1 and ErrorCode(run.code) == ErrorCode.BAD_STOP


# -- timing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("b", [0, 1, 2])
def test_one_beat_per_cycle(b):
    n = 3
    tensors = [[np.full((1, 2), 10 * j + i, np.int8) for i in range(4 + j)] for j in range(n)]
    for _ in range(b):
        tensors = [[[x] * (1 + i % 3) for i, x in enumerate(t)] for t in tensors]
    streams = [from_nested(t, b) for t in tensors]
    run, ins = run_merge(streams, b)
    check_eager_merge(streams, run.outputs["data"], run.outputs["select"], b)
    beats = sum(len(beats_of(feed)) for _, feed in ins.values())
    # the grant is combinational: no gap between chunks, also when the grant changes hands;
    # one more cycle for the bare Done
    assert run.cycles == beats + 1
    assert run.status_counts == {"busy": run.cycles, "stall_in": 0, "stall_out": 0}


def test_no_ready_to_valid_path():
    streams = [tok("1 2 S1"), tok("3 S1 4 S1")]
    check_ready_to_valid(EagerMergeUnit(Index(), 2, 1),
                         {f"in{j}": (beat_layout(Index(), 1), s) for j, s in enumerate(streams)},
                         {"data": beat_layout(Index(), 1), "select": beat_layout(Select(2), 0)})


def test_bad_parameters():
    for args in [(Index(), 0, 1), (Index(), 2, -1), (Index(), 2, 1.0)]:
        with pytest.raises(ValueError):
            EagerMergeUnit(*args)
    assert repr(EagerMergeUnit(Index(), 3, 1)) == "EagerMergeUnit(Index(), 3, 1)"


def test_one_chunk_per_selector_beat():
    streams = [tok("1 S1 2 S1"), tok("3 4 S1")]
    run, _ = run_merge(streams, 1, elem=Index(), valid_p=0.4, ready_p=0.4, seed=11)
    recovered = check_eager_merge(streams, run.outputs["data"], run.outputs["select"], 1)
    assert recovered == [[tok("1 S1"), tok("2 S1")], [tok("3 4 S1")]]
    assert_tokens(sum(recovered[0], []), streams[0], "in0")
    assert len(to_beats(run.outputs["select"])) == 3
