# amaranth: UnusedElaboratable=no
"""AddrGenUnit against the interpreter's ``flat_map`` with ``addr_gen``."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Bool, Index, Select, Tile, Tuple, fp32, int8, int16
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, stop, to_beats
from stepforge.hdl.addrgen import AddrGenUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_compute import expander, flat_map
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_retile import beats_equal, check_run, project, reframe
from .test_tokens import ragged

# value kinds: (element type, value strategy)
KINDS = {
    "index": (Index(), st.integers(0, 40)),
    "select": (Select(4), st.integers(0, 3).map(lambda i: 1 << i)),
    "tile": (Tile(int8, 1, 1), st.integers(-9, 9).map(lambda v: np.array([[v]], np.int8))),
}


def interpreter(tokens, elem_type, shape, strides, scale, offset):
    fn = F.addr_gen(shape, strides, scale=scale, offset=offset)
    return flat_map(tokens, expander(fn, elem_type), len(shape) - 1)


@st.composite
def addr_case(draw, counted=False):
    """A walk and ragged input values; with ``counted``, every element a pair ``(value,
    count)`` with ``0 <= count <= shape[-1]`` (the walk's innermost dimension is ragged)."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    elem_type, values = KINDS[kind]
    rank = draw(st.integers(0, 2))
    shape = draw(st.lists(st.integers(1, 4 if counted else 3), min_size=1, max_size=3))
    strides = draw(st.lists(st.integers(-3, 4), min_size=len(shape), max_size=len(shape)))
    scale = draw(st.integers(-2, 5))
    offset = draw(st.integers(100, 300))  # every address stays >= 0
    elems = st.tuples(values, st.integers(0, shape[-1])) if counted else values
    tensors = draw(ragged(rank, elems=elems, max_size=3))
    return elem_type, rank, shape, strides, scale, offset, tensors


@settings(deadline=None, max_examples=25)
@given(addr_case(), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16),
       st.randoms(use_true_random=False))
def test_matches_interpreter(case, valid_p, ready_p, seed, rnd):
    elem_type, rank, shape, strides, scale, offset, tensors = case
    tokens = from_nested(tensors, rank)
    canonical = rnd.random() < 0.3
    fed = {"in0": reframe(to_beats(tokens), rnd, 0 if canonical else 0.5)}
    want = interpreter(tokens, elem_type, shape, strides, scale, offset)
    dut = AddrGenUnit(elem_type, rank, shape, strides, scale=scale, offset=offset)
    run = simulate(dut, {"in0": (beat_layout(elem_type, rank), fed["in0"])},
                   {"out": beat_layout(Index(), dut.out_rank)},
                   valid_p=valid_p, ready_p=ready_p, seed=seed)
    check_run(run, want, fed, canonical=canonical)


def run_counted(elem_type, rank, shape, strides, scale, offset, tokens, rnd=None, **kw):
    """The unit with ``count`` on ``tokens`` (pairs ``(value, count)``), and what the interpreter
    says: ``(run, want, fed)``."""
    fn = F.addr_gen(shape, strides, scale=scale, offset=offset, counted=True)
    want = flat_map(tokens, expander(fn, Tuple(elem_type, Index())), len(shape) - 1)
    fed = {port: to_beats(project(tokens, i)) for i, port in enumerate(("in0", "count"))}
    if rnd is not None:
        fed = {port: reframe(beats, rnd, 0.5) for port, beats in fed.items()}
    dut = AddrGenUnit(elem_type, rank, shape, strides, scale=scale, offset=offset, counted=True)
    run = simulate(dut, {"in0": (beat_layout(elem_type, rank), fed["in0"]),
                         "count": (beat_layout(Index(), rank), fed["count"])},
                   {"out": beat_layout(Index(), dut.out_rank)}, **kw)
    return run, want, fed


@settings(deadline=None, max_examples=25)
@given(addr_case(counted=True), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16),
       st.randoms(use_true_random=False))
def test_counted_matches_interpreter(case, valid_p, ready_p, seed, rnd):
    elem_type, rank, shape, strides, scale, offset, tensors = case
    tokens = from_nested(tensors, rank)
    canonical = rnd.random() < 0.3
    run, want, fed = run_counted(elem_type, rank, shape, strides, scale, offset, tokens,
                                 None if canonical else rnd, valid_p=valid_p, ready_p=ready_p,
                                 seed=seed)
    check_run(run, want, fed, canonical=canonical)


def test_counted_ranges_by_hand():
    # a request's keys from its base: (10, 3) -> 10 11 12, (20, 0) -> an empty fibre, (30, 5)
    # -> 30..34; the input's S1 closes the last fibre as S2
    tokens = [(10, 3), (20, 0), (30, 5), stop(1)]
    run, want, _ = run_counted(Index(), 1, [1, 5], [0, 1], 1, 0, tokens)
    assert run.error == 0
    assert run.outputs["out"] == want == [10, 11, 12, stop(1), stop(1), 30, 31, 32, 33, 34,
                                          stop(2)]
    # b = 0: a count of 0 yields nothing; the stop on it moves to the previous address
    run, want, _ = run_counted(Index(), 1, [4], [2], 1, 0, [(0, 2), (8, 0), stop(1)])
    assert run.outputs["out"] == want == [0, 2, stop(1)]
    # the outer dimension steps by a constant whatever the inner count
    run, want, _ = run_counted(Index(), 0, [2, 3], [100, -1], 1, 50, [(0, 2), (7, 3)])
    assert run.outputs["out"] == want == [50, 49, stop(1), 150, 149, stop(1),
                                          57, 56, 55, stop(1), 157, 156, 155, stop(1)]


def test_counted_one_address_per_cycle():
    tokens = [(0, 4), (10, 4), (20, 4), stop(1)]
    run, want, _ = run_counted(Index(), 1, [4], [1], 1, 0, tokens)
    assert run.outputs["out"] == want and len(run.beats["out"]) == run.cycles == 12


@pytest.mark.parametrize("count", [5, 2**32 - 1])
def test_count_above_the_bound(count):
    with pytest.raises(StepRuntimeError):
        flat_map([(0, count)], expander(F.addr_gen([4], [1], counted=True),
                                        Tuple(Index(), Index())), 0, op="AddrGen_0")
    dut = AddrGenUnit(Index(), 0, [4], [1], counted=True)
    run = simulate(dut, {"in0": (beat_layout(Index(), 0), [0, 0]),
                         "count": (beat_layout(Index(), 0), [2, count])},
                   {"out": beat_layout(Index(), 0)})
    assert (run.error, run.code) == (1, ErrorCode.OVER_BOUND)
    assert run.accepted == {"in0": 1, "count": 1}  # the faulty element is not taken
    # the first element's last address waits for the next beat's stop, which never comes
    assert [b.data for b in run.beats["out"]] == [0]


def test_counted_range_check_follows_the_count():
    # base 2**32 - 3, stride 1: three addresses fit, four do not; a count of 0 emits none
    top = 2**32 - 3
    for count, fault in ((3, False), (4, True), (0, False)):
        if fault:
            with pytest.raises(StepRuntimeError):
                flat_map([(top, count)], expander(F.addr_gen([4], [1], counted=True),
                                                  Tuple(Index(), Index())), 0, op="AddrGen_0")
        dut = AddrGenUnit(Index(), 0, [4], [1], counted=True)
        run = simulate(dut, {"in0": (beat_layout(Index(), 0), [top]),
                             "count": (beat_layout(Index(), 0), [count])},
                       {"out": beat_layout(Index(), 0)})
        assert (run.error, run.code) == ((1, ErrorCode.ADDRESS_RANGE) if fault else (0, 0))
        assert [b.data for b in run.beats["out"] if b.has_data] == (
            [] if fault else list(range(top, top + count)))


def test_walk_and_stops_by_hand():
    # v = 2 -> base 10 + 3 * 2 = 16; shape [2, 3], strides [100, 1]: a rank-1 sub-stream of two
    # fibres; the input's S1 becomes S2 on the last address.
    dut = AddrGenUnit(Index(), 1, [2, 3], [100, 1], scale=3, offset=10)
    run = simulate(dut, {"in0": (beat_layout(Index(), 1), [2, stop(1)])},
                   {"out": beat_layout(Index(), 2)})
    assert run.outputs["out"] == [16, 17, 18, stop(1), 116, 117, 118, stop(2)]
    assert run.outputs["out"] == interpreter([2, stop(1)], Index(), [2, 3], [100, 1], 3, 10)


def test_wide_values_and_large_addresses():
    # an Index near 2**32 and an int16 tile value, with addresses close to the 32-bit limit
    tokens = [2**32 - 8, 2**31, stop(1)]
    want = interpreter(tokens, Index(), [4], [2], 1, 0)
    run = simulate(AddrGenUnit(Index(), 1, [4], [2]), {"in0": (beat_layout(Index(), 1), tokens)},
                   {"out": beat_layout(Index(), 1)})
    assert run.outputs["out"] == want and want[3] == 2**32 - 2
    t = Tile(int16, 1, 1)
    tokens = [np.array([[-1000]], np.int16), np.array([[32767]], np.int16)]
    want = interpreter(tokens, t, [2], [-1], -7, 2**20)
    run = simulate(AddrGenUnit(t, 0, [2], [-1], scale=-7, offset=2**20),
                   {"in0": (beat_layout(t, 0), tokens)}, {"out": beat_layout(Index(), 0)})
    assert run.outputs["out"] == want


def test_empty_fibres_and_bare_done():
    dut = AddrGenUnit(Index(), 2, [2], [1])
    fed = [Beat(None, 0, 1, 0), Beat(4, 1, 2, 0), Beat(None, 0, 0, 1)]
    run = simulate(dut, {"in0": (beat_layout(Index(), 2), fed)}, {"out": beat_layout(Index(), 2)})
    assert beats_equal(run.beats["out"], [Beat(None, 0, 1, 0), Beat(4, 1, 0, 0), Beat(5, 1, 2, 0),
                                          Beat(None, 0, 0, 1)])
    run = simulate(dut, {"in0": (beat_layout(Index(), 2), [])}, {"out": beat_layout(Index(), 2)})
    assert run.beats["out"] == [Beat(None, 0, 0, 1)]


@pytest.mark.parametrize("shape", [[5], [2, 3], [2, 1, 3]])
def test_one_address_per_cycle(shape):
    n = int(np.prod(shape))
    tokens = from_nested([[1, 2, 3], [4, 5]], 1)
    dut = AddrGenUnit(Index(), 1, shape, [1] * len(shape))
    run = simulate(dut, {"in0": (beat_layout(Index(), 1), tokens)},
                   {"out": beat_layout(Index(), dut.out_rank)})
    assert len(run.beats["out"]) == run.cycles == 5 * n


@pytest.mark.parametrize("mask", [0, 0b0110, 0b1111])
def test_selector_not_one_hot(mask):
    with pytest.raises(StepRuntimeError):
        interpreter([1, mask], Select(4), [2], [1], 1, 0)
    dut = AddrGenUnit(Select(4), 0, [2], [1])
    run = simulate(dut, {"in0": (beat_layout(Select(4), 0), [1, mask, 2])},
                   {"out": beat_layout(Index(), 0)})
    assert (run.error, run.code) == (1, ErrorCode.NOT_ONE_HOT)
    assert run.accepted == {"in0": 1}  # the faulty selector is not taken
    assert [b.data for b in run.beats["out"]] == [0]  # nothing of it was emitted


@pytest.mark.parametrize("value,strides,scale,offset", [
    (3, [1, 1], -2, 4),          # the first address is -2
    (3, [1, -9], 1, 4),          # the walk goes below 0 on its second address
    (2**32 - 3, [1], 1, 0),      # the walk runs past 2**32 - 1
    (2**31, [1], 2, 0),          # the base is 2**32
])
def test_address_out_of_range(value, strides, scale, offset):
    shape = [2] * len(strides) if len(strides) == 2 else [4]
    with pytest.raises(StepRuntimeError):
        interpreter([value], Index(), shape, strides, scale, offset)
    dut = AddrGenUnit(Index(), 0, shape, strides, scale=scale, offset=offset)
    run = simulate(dut, {"in0": (beat_layout(Index(), 0), [value])},
                   {"out": beat_layout(Index(), dut.out_rank)})
    assert (run.error, run.code) == (1, ErrorCode.ADDRESS_RANGE)
    assert run.accepted == {"in0": 0} and run.beats["out"] == []


def test_stop_above_the_rank_is_bad_stop():
    dut = AddrGenUnit(Index(), 0, [2], [1])
    run = simulate(dut, {"in0": (beat_layout(Index(), 0), [Beat(1, 1, 1, 1)])},
                   {"out": beat_layout(Index(), 0)})
    assert (run.error, run.code) == (1, ErrorCode.BAD_STOP)


def test_no_ready_to_valid_path():
    tokens = from_nested([[1, 2], [], [3]], 1)
    for shape in ([1], [2], [2, 2]):
        dut = AddrGenUnit(Index(), 1, shape, [1] * len(shape))
        check_ready_to_valid(dut, {"in0": (beat_layout(Index(), 1), tokens)},
                             {"out": beat_layout(Index(), dut.out_rank)})


def test_ports_and_repr():
    dut = AddrGenUnit(Select(8), 1, [2, 4], [4, 1], scale=8, offset=3)
    assert repr(dut) == "AddrGenUnit(Select(8), 1, [2, 4], [4, 1], scale=8, offset=3)"
    assert set(dict(dut.signature.members)) == {"in0", "out", "status"}
    assert dut.out_rank == 2
    for bad in (([], []), ([0], [1]), ([2], [1, 1]), ([2], [1.5])):
        with pytest.raises(ValueError):
            AddrGenUnit(Index(), 0, *bad)
    for elem in (Tile(int8, 2, 1), Tile(fp32, 1, 1), Bool()):
        with pytest.raises(ValueError):
            AddrGenUnit(elem, 0, [2], [1])
    with pytest.raises(ValueError):
        AddrGenUnit(Index(), 0, [2], [1], scale=1.5)
