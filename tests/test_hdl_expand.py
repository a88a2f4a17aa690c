# amaranth: UnusedElaboratable=no
"""ExpandUnit against the reference interpreter's ``expand``: outputs, run-time faults, framings."""

import itertools

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Index
from stepforge.contract.beat import beat_layout, pack_beat
from stepforge.contract.tokens import Beat, canonical, from_nested, is_stop, stop, to_beats
from stepforge.hdl.expand import ExpandUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_shape import expand
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_promote import ELEM, FRAMING, TILES, bare_done, reframe, tile, tokens_equal
from .test_tokens import ragged

REF = Index()


def run_past_error(dut, inputs, outputs, extra=20, max_cycles=400):
    """Feed ``inputs`` (valid whenever a beat is left, every output ready) until ``status.error``
    rises, then ``extra`` cycles more.

    Returns ``(code, accepted, moved_after)``: the error code, the beats accepted per input
    before the error rose, and the transfers on any port after it rose (must be 0: a unit that
    has flagged a fault stops accepting and sending).
    """
    feeds = {n: [pack_beat(layout, b) for b in (beats if beats and isinstance(beats[0], Beat)
                                                 else to_beats(beats))]
             for n, (layout, beats) in inputs.items()}
    ins = {n: getattr(dut, n) for n in inputs}
    outs = {n: getattr(dut, n) for n in outputs}
    result = {}

    async def bench(ctx):
        sent = {n: 0 for n in ins}
        moved_after = 0
        raised_at = None
        for cycle in range(max_cycles):
            if raised_at is None and ctx.get(dut.status.error):
                raised_at = cycle
                result["code"] = ctx.get(dut.status.code)
                result["accepted"] = dict(sent)
            if raised_at is not None and cycle >= raised_at + extra:
                break
            for n, port in ins.items():
                more = sent[n] < len(feeds[n])
                ctx.set(port.valid, more)
                ctx.set(Value.cast(port.payload), feeds[n][sent[n]] if more else 0)
            for port in outs.values():
                ctx.set(port.ready, 1)
            pushes = {n: bool(ctx.get(p.valid) and ctx.get(p.ready)) for n, p in ins.items()}
            pops = sum(bool(ctx.get(p.valid)) for p in outs.values())
            if raised_at is not None:
                moved_after += sum(pushes.values()) + pops
            await ctx.tick()
            for n in ins:
                sent[n] += pushes[n]
        result["moved_after"] = moved_after
        result["raised"] = raised_at is not None

    top = Module()
    top.submodules.dut = dut
    heartbeat = Signal(name="heartbeat")
    top.d.sync += heartbeat.eq(~heartbeat)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert result["raised"], "the unit never raised its error flag"
    return result["code"], result["accepted"], result["moved_after"]


def collapse(tensor, level, b, values):
    """``tensor`` (canonical, ``level`` levels deep) with each level-``b`` fibre replaced by
    ``b`` nested size-1 lists around the next value of ``values``: a data stream for Expand."""
    if level == b:
        v = next(values)
        for _ in range(b):
            v = [v]
        return v
    return [collapse(c, level - 1, b, values) for c in tensor]


@st.composite
def expand_case(draw, corrupt=None):
    """``(rank, b, data, ref)``: a reference stream and the data stream that fits it, with
    distinct elements; ``corrupt="unrelated"`` replaces the data by an unrelated stream,
    ``corrupt="mutated"`` changes, drops or doubles one of its tokens."""
    rank = draw(st.integers(1, 3))
    b = draw(st.integers(1, rank))
    ref = canonical(draw(ragged(rank, elems=st.integers(0, 9), max_size=3)), rank)
    start = draw(st.integers(0, 255))
    values = (tile((start + i) % 256 - 128) for i in itertools.count())
    data = from_nested([collapse(t, rank, b, values) for t in ref], rank)
    if corrupt == "unrelated":
        data = from_nested(draw(ragged(rank, elems=TILES, max_size=3)), rank)
    elif corrupt and data:  # one token of a matching data stream changed, dropped or doubled
        k = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["level", "drop", "double"] if rank > 1 else ["drop", "double"]))
        if how == "level" and is_stop(data[k]):
            data[k] = stop(draw(st.sampled_from([s for s in range(1, rank + 1) if s != data[k].level])))
        elif how == "drop":
            del data[k]
        else:
            data.insert(k, data[k])
    return rank, b, data, from_nested(ref, rank)


def run_expand(rank, b, data, ref, **kw):
    return simulate(ExpandUnit(ELEM, REF, rank, b),
                    {"in0": (beat_layout(ELEM, rank), data), "ref": (beat_layout(REF, rank), ref)},
                    {"out": beat_layout(ELEM, rank)}, **kw)


@settings(deadline=None, max_examples=30)
@given(expand_case(), FRAMING, FRAMING, st.floats(0.3, 1.0), st.floats(0.3, 1.0),
       st.integers(0, 2**16))
def test_matches_interpreter(case, data_framing, ref_framing, valid_p, ready_p, seed):
    rank, b, data, ref = case
    want = expand(data, ref, b)
    dbeats, rbeats = reframe(data, data_framing), reframe(ref, ref_framing)
    run = run_expand(rank, b, dbeats, rbeats, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert run.error == 0
    assert tokens_equal(run.outputs["out"], want)
    assert run.accepted == {"in0": len(dbeats), "ref": len(rbeats)}


def expected_code(exc):
    """The hardware error code of an interpreter ``expand`` error."""
    msg = str(exc)
    if "end of the data" in msg or "reference ended" in msg:
        return ErrorCode.EARLY_END
    return ErrorCode.REF_MISMATCH


@settings(deadline=None, max_examples=30)
@given(st.sampled_from(["unrelated", "mutated"]).flatmap(expand_case), FRAMING, FRAMING,
       st.integers(0, 2**16))
def test_faults_match_interpreter(case, data_framing, ref_framing, seed):
    rank, b, data, ref = case
    dbeats, rbeats = reframe(data, data_framing), reframe(ref, ref_framing)
    try:
        want = expand(data, ref, b)
    except StepRuntimeError as exc:
        code, accepted, moved_after = run_past_error(
            ExpandUnit(ELEM, REF, rank, b),
            {"in0": (beat_layout(ELEM, rank), dbeats), "ref": (beat_layout(REF, rank), rbeats)},
            {"out": beat_layout(ELEM, rank)})
        assert code == expected_code(exc), str(exc)
        assert moved_after == 0
        assert accepted["ref"] < len(rbeats) or accepted["in0"] < len(dbeats)
    else:
        run = run_expand(rank, b, dbeats, rbeats, seed=seed)
        assert run.error == 0 and tokens_equal(run.outputs["out"], want)


def fault(rank, b, data, ref):
    return run_past_error(
        ExpandUnit(ELEM, REF, rank, b),
        {"in0": (beat_layout(ELEM, rank), data), "ref": (beat_layout(REF, rank), ref)},
        {"out": beat_layout(ELEM, rank)})


def test_ref_mismatch():
    # the data's element closes with S2 (a whole tensor) where the reference ends a row (S1)
    data = from_nested([[[tile(1)]]], 2)           # a S2
    ref = from_nested([[[0, 0], [0]]], 2)          # 0 0 S1 0 S2
    code, accepted, moved_after = fault(2, 1, data, ref)
    assert code == ErrorCode.REF_MISMATCH and moved_after == 0
    assert accepted == {"in0": 0, "ref": 1}  # the beat that shows the mismatch is not taken


def test_data_ends_early():
    data = from_nested([[tile(1)]], 1)             # a S1
    ref = from_nested([[0, 0], [0]], 1)            # 0 0 S1 0 S1: a second repetition
    code, accepted, moved_after = fault(1, 1, data, ref)
    assert code == ErrorCode.EARLY_END and moved_after == 0
    # the data's one beat (a, S1, last) is kept for its Done, which the reference never reaches
    assert accepted == {"in0": 0, "ref": 2}


def test_ref_ends_early():
    data = from_nested([[tile(1)], [tile(2)]], 1)  # a S1 b S1
    ref = from_nested([[0, 0]], 1)                 # 0 0 S1: b is left over
    code, accepted, moved_after = fault(1, 1, data, ref)
    assert code == ErrorCode.EARLY_END and moved_after == 0
    assert accepted == {"in0": 1, "ref": 1}


def test_split_data_and_bare_dones():
    # every data stop in its own beat, both streams ending with a bare Done
    data = from_nested([[[tile(1)], [tile(2)]], [[tile(3)]]], 2)
    ref = from_nested([[[0, 0, 0], []], [[0, 0]]], 2)
    run = run_expand(2, 1, bare_done(data), bare_done(ref))
    assert tokens_equal(run.outputs["out"], expand(data, ref, 1))
    assert run.accepted == {"in0": len(bare_done(data)), "ref": len(bare_done(ref))}


def test_empty_streams():
    run = run_expand(2, 2, [], [])
    assert run.outputs["out"] == [] and run.accepted == {"in0": 1, "ref": 1}


@pytest.mark.parametrize("b", [1, 2])
def test_one_output_beat_per_reference_beat(b):
    ref = from_nested([[[0, 1, 2, 3], [4, 5]]] * 4, 2)
    data = from_nested([[[tile(i)], [tile(i + 1)]] for i in range(4)] if b == 1
                       else [[[tile(i)]] for i in range(4)], 2)
    run = run_expand(2, b, data, ref)
    assert len(run.beats["out"]) == len(to_beats(ref)) == 24
    assert run.cycles == 24  # combinational: no latency


def test_no_ready_to_valid_path():
    data = from_nested([[[tile(1)], [tile(2)]]], 2)
    ref = from_nested([[[0, 0], [0]]], 2)
    check_ready_to_valid(ExpandUnit(ELEM, REF, 2, 1),
                         {"in0": (beat_layout(ELEM, 2), bare_done(data)),
                          "ref": (beat_layout(REF, 2), ref)},
                         {"out": beat_layout(ELEM, 2)})


def test_parameters():
    assert repr(ExpandUnit(ELEM, REF, 2, 1)) == "ExpandUnit(Tile(int8, 1, 2), Index(), 2, 1)"
    for rank, b in ((0, 1), (2, 0), (2, 3), (2, True)):
        with pytest.raises(ValueError):
            ExpandUnit(ELEM, REF, rank, b)
