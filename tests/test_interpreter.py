"""The interpreter as a whole: run-time errors through run(), beats, traces, passes and pictures."""

import numpy as np
import pytest

from stepforge import (Bufferize, Map, Partition, Program, Select, StepRuntimeError, Streamify,
                       Tile, Zip, int8, int32, run)
from stepforge.compiler.dot import to_dot
from stepforge.compiler.metrics import bind, metrics
from stepforge.compiler.passes import insert_broadcasts
from stepforge.compiler.types import Index
from stepforge.contract.tokens import Beat, stop


def tile(v):
    return np.array([[v]], dtype=np.int8)


def test_zip_stop_mismatch_names_operator_and_beat():
    p = Program("t")
    a = p.input("a", [2, 3], Tile(int8, 1, 1))
    b = p.input("b", [2, 3], Tile(int8, 1, 1))
    p.output(Map(lambda u, v: u + v, a, b), "y")
    with pytest.raises(StepRuntimeError) as e:
        run(p, inputs={"a": [[1, 2, 3], [4, 5, 6]], "b": [[1, 2], [3, 4, 5, 6]]})
    # beats of a: 1 2 3S1 4 5 6S1; of b: 1 2S1 3 4 5 6S1 -- they first differ at beat 1
    assert str(e.value) == ("Map_0: stop mismatch between in0 and in1 at beat 1: "
                            "(element, stop 0) vs (element, stop 1)")
    assert e.value.op == "Map_0" and e.value.beat == 1


def test_dynamic_size_over_its_bound_names_the_symbol_and_value():
    p = Program("t")
    B = p.symbol("B", bound=3)
    x = p.input("x", [1, B], Index())
    p.output(x, "y")
    with pytest.raises(StepRuntimeError, match=r"x: dimension B of x is 4, over its bound 3"):
        run(p, inputs={"x": [[1, 2, 3, 4]]})
    assert run(p, inputs={"x": [[1, 2, 3]]}).outputs["y"] == [[1, 2, 3]]


def test_partition_selector_data_mismatch():
    p = Program("t")
    x = p.input("x", [2, 2], Index())
    sel = p.input("sel", [2, 2], Select(2))
    outs = Partition(x, sel, 2, 0)
    p.output(outs[0], "o0")
    p.output(outs[1], "o1")
    with pytest.raises(StepRuntimeError, match=r"Partition_0: stop mismatch at data beat"):
        run(p, inputs={"x": [[1, 2, 3], [4]], "sel": [[1, 2], [1, 2]]})


def test_unclosed_buffer_and_early_end():
    from stepforge.sim.ref.ops_memory import bufferize
    with pytest.raises(StepRuntimeError, match=r"B: the stream ended at beat 1 inside an unclosed buffer"):
        bufferize([tile(1), stop(1), tile(2)], 2, shape=(2, 2), symbols=Program("t").symbols,
                  new_id=iter(range(9)).__next__, op="B")


def test_beats_on_request_and_trace():
    p = Program("t")
    R = p.symbol("R", ragged=True, bound=4)
    x = p.input("x", [2, R], Index())
    p.output(x, "y")
    res = run(p, inputs={"x": [[1, 2], []]}, keep_edges=True)
    assert res.beats(x) == [Beat(1, 1, 0, 0), Beat(2, 1, 1, 0), Beat(None, 0, 1, 1)]
    assert res.trace[R] == [2, 0]
    assert res.outputs["y"] == [[1, 2], []]


def test_broadcast_insertion_keeps_the_meaning():
    def build():
        p = Program("t")
        x = p.input("x", [1, 4], Tile(int8, 1, 1))
        y = Map(lambda v: v + v, x)
        p.output(Zip(x, y), "z")
        p.output(x, "x_again")
        return p
    p = build()
    data = {"x": [[tile(1), tile(2), tile(3), tile(4)]]}
    before = run(p, inputs=data).outputs
    insert_broadcasts(p)
    assert all(len(readers) <= 1 for readers in p.consumers().values())
    assert [n.op for n in p.nodes].count("Broadcast") == 1
    after = run(p, inputs=data).outputs
    assert repr(before) == repr(after)
    insert_broadcasts(p)
    assert [n.op for n in p.nodes].count("Broadcast") == 1


def test_buffer_freed_after_every_consumer():
    p = Program("t")
    x = p.input("x", [2, 3], Tile(int8, 1, 1))
    buf = Bufferize(x, 1)
    p.output(Streamify(buf, repeat=2), "a")
    p.output(Streamify(buf), "b")
    res = run(p, inputs={"x": [[tile(1), tile(2), tile(3)], [tile(4), tile(5), tile(6)]]})
    assert res.freed == [0, 1] and res.live_buffers == {}


def test_integer_overflow_wraps():
    p = Program("t")
    x = p.input("x", [1, 1], Tile(int8, 1, 1))
    p.output(Map(lambda v: v + v, x), "y")
    assert run(p, inputs={"x": [[tile(100)]]}).outputs["y"][0][0][0, 0] == -56


def test_metrics_substitute_from_trace():
    p = Program("t")
    B = p.symbol("B", bound=8)
    x = p.input("x", [1, B], Tile(int32, 2, 2))
    y = Map(lambda v: v * v, x)
    p.output(y, "y")
    m = metrics(p)
    assert m.flops == 4 * B
    res = run(p, inputs={"x": [[np.ones((2, 2), np.int32)] * 5]})
    assert m.subs(bind(p, res.trace)).flops == 20


def test_dot_labels_edges_with_shapes():
    p = Program("t")
    x = p.input("x", [2, p.symbol("B")], Index())
    p.output(x, "y")
    dot = to_dot(p)
    assert '"x" -> "y" [label="[2, B] Index()", headlabel="in0"];' in dot


def test_tie_off_drains_unread_outputs():
    from stepforge.compiler.passes import tie_off
    from stepforge import Reshape
    p = Program("t")
    x = p.input("x", [3], Tile(int8, 1, 1))
    r = Reshape(x, 2, 0, pad=0, flags=True)
    p.output(r[0], "y")
    tie_off(p)
    assert [n.op for n in p.nodes] == ["Input", "Reshape", "Discard", "Output"]
    assert all(len(readers) == 1 for readers in p.consumers().values())
    out = run(p, inputs={"x": [tile(1), tile(2), tile(3)]}).outputs["y"]
    assert [[int(v[0, 0]) for v in row] for row in out] == [[1, 2], [3, 0]]
    tie_off(p)
    assert [n.op for n in p.nodes].count("Discard") == 1
