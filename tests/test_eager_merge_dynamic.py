"""EagerMerge of dynamic tiles (issue 10): inputs whose element types differ only in a bounded
dynamic row count merge into tiles with a fresh ragged row count bounded by the largest input
bound; every other difference is refused, with the operator, the port and both types named.
The interpreter merges such tiles unchanged (the time-multiplexed dynamic MoE is checked in
``tests/test_paper_tm.py``)."""

import re

import numpy as np
import pytest

from stepforge.compiler.errors import StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.routing import EagerMerge, Reassemble
from stepforge.compiler.types import Select, Tile, int16, int32
from stepforge.sim.ref.interpreter import run


def _merge(*elems):
    """EagerMerge (b = 0) of one ``[2]`` input stream per element type."""
    p = Program("em")
    xs = [p.input(f"x{i}", [2], elem(p) if callable(elem) else elem)
          for i, elem in enumerate(elems)]
    return p, EagerMerge(xs, 0)


def _rows(name, bound):
    return lambda p: Tile(int16, p.symbol(name, bound=bound), 4)


def test_different_bounded_row_counts_merge_into_a_fresh_ragged_symbol():
    p, m = _merge(_rows("A", 3), _rows("B", 5))
    rows = m[0].dtype.rows
    assert m[0].dtype == Tile(int16, rows, 4)
    assert str(rows).startswith("EM_")
    info = p.symbols.info(rows)
    assert (info.kind, info.bound, info.origin) == ("ragged", 5, m.name)
    assert m[0].shape == (4,)


def test_equal_element_types_keep_theirs():
    p = Program("em")
    A = p.symbol("A", bound=3)
    m = EagerMerge([p.input(f"x{i}", [2], Tile(int16, A, 4)) for i in range(2)], 0)
    assert m[0].dtype.rows == A


@pytest.mark.parametrize("second, why", [
    (lambda p: Tile(int32, p.symbol("B", bound=5), 4), "dtype"),
    (lambda p: Tile(int16, p.symbol("B", bound=5), 8), "columns"),
    (Tile(int16, 3, 4), "static rows"),
])
def test_other_differences_are_refused(second, why):
    p = Program("em")
    first = _rows("A", 3)(p)
    x1 = second(p) if callable(second) else second
    with pytest.raises(StepTypeError, match=re.escape(
            f"EagerMerge_0: port 'in1' must carry the element type of in0, or a dynamic tile "
            f"of its dtype and columns: in0 {first!r} [2] vs in1 {x1!r} [2]")):
        EagerMerge([p.input("x0", [2], first), p.input("x1", [2], x1)], 0)


def test_an_unbounded_row_count_is_refused():
    with pytest.raises(StepTypeError, match=re.escape(
            "EagerMerge_0: port 'in1' merges tiles of different row counts, so every row count "
            "needs a bound: in1 Tile(int16, B, 4) [2] has none (in0 Tile(int16, A, 4) [2])")):
        _merge(_rows("A", 3), _rows("B", None))


def test_reassemble_still_needs_one_element_type():
    p = Program("ra")
    a, b = _rows("A", 3)(p), _rows("B", 5)(p)
    sel = p.input("sel", [2], Select(2))
    with pytest.raises(StepTypeError, match=re.escape(
            f"Reassemble_0: port 'in1' must carry the element type of in0: in0 {a!r} [2] vs "
            f"in1 {b!r} [2]")):
        Reassemble([p.input("x0", [2], a), p.input("x1", [2], b)], sel, 0)


def test_the_interpreter_merges_tiles_of_different_row_counts_unchanged():
    p, m = _merge(_rows("A", 3), _rows("B", 5))
    p.output(m[0], "data")
    p.output(m[1], "select")
    x0 = [np.full((r, 4), r, np.int16) for r in (1, 3)]
    x1 = [np.full((r, 4), 10 + r, np.int16) for r in (5, 0)]
    res = run(p, inputs={"x0": x0, "x1": x1})
    got = res.outputs["data"]
    assert [t.shape[0] for t in got] == [1, 5, 3, 0]
    assert all(np.array_equal(g, w) for g, w in zip(got, [x0[0], x1[0], x0[1], x1[1]]))
    assert res.outputs["select"] == [1, 2, 1, 2]


def _packed_merge(bounds):
    """EagerMerge of dynamic tiles packed by Accum(retile_row) from filtered loads of ``bounds``
    rows each; the merged tiles and the selector are host outputs."""
    from stepforge import Accum, Bool, Filter, LinearOffChipLoad, retile_row
    p = Program("em")
    packed = []
    for name, n in zip("AB", bounds):
        t = p.tensor(name, (n, 4), int16)
        s = LinearOffChipLoad(t, (1, 4), out_shape=(n,), stride=(1,))
        packed.append(Accum(retile_row, None, Filter(s, p.input(f"f{name}", [1, n], Bool())),
                            b=1))
    m = EagerMerge(packed, 0)
    p.output(m[0], "o")
    p.output(m[1], "sel")
    return p


def test_the_lowering_refuses_different_row_bounds():
    from stepforge.compiler.errors import LoweringError
    from stepforge.compiler.lower import lower
    with pytest.raises(LoweringError, match=re.escape(
            "EagerMerge_0: merging dynamic tiles of different row bounds is not built in "
            "hardware (their beats differ in width): in0 Tile(int16, FM_0, 4) (rows <= 3), in1 "
            "Tile(int16, FM_1, 4) (rows <= 5); declare one bound for every input's row count")):
        lower(_packed_merge((3, 5)))


@pytest.mark.slow
def test_dynamic_tiles_of_one_bound_merge_in_verilator():
    """Two row symbols of one bound: the merged tiles and the selector reach the host (a host
    output of dynamic tiles) as the interpreter gives them, in either merge order."""
    from stepforge.contract.values import values_equal
    from stepforge.sim.rtl import run_rtl
    p = _packed_merge((3, 3))
    rng = np.random.default_rng(1)
    tensors = {k: rng.integers(-9, 9, (3, 4)).astype(np.int16) for k in "AB"}
    inputs = {"fA": [[True, False, True]], "fB": [[False, True, True]]}
    ref = run(p, tensors=tensors, inputs=inputs)
    res = run_rtl(p, tensors, inputs)
    assert res.status == "done"
    want = sorted(zip(ref.outputs["sel"], ref.outputs["o"]), key=lambda x: str(x[0]))
    got = sorted(zip(res.outputs["sel"], res.outputs["o"]), key=lambda x: str(x[0]))
    assert len(got) == len(want) == 2
    assert all(values_equal(g[0], w[0]) and values_equal(g[1], w[1]) for g, w in zip(got, want))
