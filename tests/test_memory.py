"""On-chip memory operators: Bufferize, Streamify and buffer lifetimes (spec section 4).

Hand-worked token sequences for every Streamify form, the Bufferize -> Streamify identity on
random ragged streams, bound and unclosed-buffer errors, the free order, and malformed programs.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError, StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.memory import Bufferize, Streamify
from stepforge.compiler.ops.shape import RepeatStatic
from stepforge.compiler.types import Buffer, Index, Tile, fp32, int16
from stepforge.contract.tokens import canonical, format_tokens, from_nested, is_stop, stop, to_nested
from stepforge.contract.values import BufferRef
from stepforge.sim.ref.interpreter import SEMANTICS, Context, run
from stepforge.sim.ref.ops_memory import bufferize, check_buffer, freed, streamify, streamify_consumers


def tok(s):
    """Tokens from the spec's notation: '1 2 S1 3 S2' (Done implicit)."""
    return [stop(int(w[1:])) if w.startswith("S") else int(w) for w in s.split()]


def fmt(tokens):
    """Tokens in the spec's notation; a buffer reference prints as ``B<id>``."""
    return " ".join(repr(t) if is_stop(t) else (f"B{t.id}" if isinstance(t, BufferRef) else repr(t))
                    for t in tokens)


def ragged(rank, max_size=3):
    """Random rank-``rank`` streams as nested lists, empty dimensions included."""
    tensor = st.integers(0, 9)
    for _ in range(rank):
        tensor = st.lists(tensor, max_size=max_size)
    return st.lists(tensor, max_size=max_size)


def stepped(program, inputs):
    """Run ``program`` node by node; yield ``(node, ctx)`` after each node (for lifetimes)."""
    from stepforge.sim.ref import ops_memory, ops_routing, ops_shape  # noqa: F401 (registration)
    ctx = Context(program, {}, inputs)
    values = {}
    for node in program.nodes:
        outs = SEMANTICS[type(node)](node, [values[s] for s in node.inputs], ctx)
        values.update(zip(node.outputs, outs))
        yield node, ctx


def ragged_input(p, name, rank, dtype=Index()):
    shape = [p.symbol(f"{name}{k}", ragged=True) for k in range(rank + 1)]
    return p.input(name, shape, dtype)


EX = [[[1, 2], [3]], [[4]]]  # rank 2: 1 2 S1 3 S2 4 S2


class TestBufferize:
    def test_rank1_buffers(self):
        refs = bufferize(tok("1 2 S1 3 S2 4 S2"), 1)
        assert fmt(refs) == "B0 B1 S1 B2 S1"
        assert [r.tokens for r in refs if not is_stop(r)] == [[1, 2], [3], [4]]

    def test_rank2_buffers_keep_internal_stops(self):
        refs = bufferize(tok("1 2 S1 3 S2 4 S2"), 2)
        assert fmt(refs) == "B0 B1"
        assert [to_nested(r.tokens, 1) for r in refs] == [[[1, 2], [3]], [[4]]]

    def test_empty_fibres_make_empty_buffers(self):
        # [[1], []] then [[]]: the stop-only beats close empty buffers
        refs = bufferize(tok("1 S1 S2 S2"), 1)
        assert fmt(refs) == "B0 B1 S1 B2 S1"
        assert [r.tokens for r in refs if not is_stop(r)] == [[1], [], []]
        refs = bufferize(tok("1 S1 S2 S2"), 2)
        assert [to_nested(r.tokens, 1) for r in refs] == [[[1], []], [[]]]

    def test_graph_shapes_and_metrics(self):
        p = Program("t")
        R = p.symbol("R", bound=8)
        x = p.input("x", (2, 3, R, 4), Tile(fp32, 2, 2))
        bz = Bufferize(x, 2)
        assert bz.shape == (2, 3)
        assert bz.dtype == Buffer(Tile(fp32, 2, 2), (R, 4))
        assert bz.onchip_bytes() == 16 + 2 * R * 4 * 16
        sf = Streamify(bz)
        assert sf.shape == (2, 3, R, 4) and sf.dtype == Tile(fp32, 2, 2)
        assert sf.onchip_bytes() == 0 and sf.offchip_read_bytes() == 0

    def test_unclosed_buffer(self):
        with pytest.raises(StepRuntimeError) as e:
            bufferize(tok("1 2 S1 3"), 2, op="Buf")
        assert str(e.value) == ("Buf: the stream ended at beat 2 inside an unclosed buffer "
                                "(3 elements after the last stop >= S2)")
        assert e.value.op == "Buf" and e.value.beat == 2

    def test_unclosed_empty_fibre(self):
        with pytest.raises(StepRuntimeError, match=r"^Buf: the stream ended at beat 0 inside an "
                           r"unclosed buffer \(0 elements"):
            bufferize([stop(1)], 2, op="Buf")

    def test_buffer_over_its_bound(self):
        p = Program("t")
        R = p.symbol("R", bound=2)
        with pytest.raises(StepRuntimeError) as e:
            bufferize(tok("1 2 S1 3 4 5 S1"), 1, shape=(R,), symbols=p.symbols, op="Buf")
        assert str(e.value) == "Buf: buffer dimension R is 3 at beat 4, over its bound 2 (buffer [R])"
        assert e.value.beat == 4

    def test_buffer_over_its_bound_in_a_program(self):
        # the input's own bound check fires first; without it, Bufferize's capacity check fires
        p = Program("t")
        R = p.symbol("R", bound=2)
        bz = Bufferize(p.input("x", (2, R), Index()), 1, name="buf")
        p.output(Streamify(bz), "y")
        data = {"x": [[1], [2, 3, 4]]}
        with pytest.raises(StepRuntimeError, match=r"^x: dimension R of x is 3, over its bound 2"):
            run(p, inputs=data)
        with pytest.raises(StepRuntimeError) as e:
            run(p, inputs=data, check_bounds=False)
        assert str(e.value) == "buf: buffer dimension R is 3 at beat 3, over its bound 2 (buffer [R])"

    def test_buffer_over_a_static_size(self):
        with pytest.raises(StepRuntimeError) as e:
            check_buffer(tok("1 S1 2 3 4 S1"), (2, 2), op="Buf")
        assert str(e.value) == "Buf: buffer dimension D_0 is 3, over its static size 2 (buffer [2, 2])"


class TestStreamify:
    def test_plain_replay(self):
        refs = bufferize(tok("1 2 S1 3 S2 4 S2"), 1)
        assert fmt(streamify(refs, 1)) == "1 2 S1 3 S2 4 S2"

    def test_static_repeat_levels_b1(self):
        # buffers [1 2], [3], [4]: every replay but the last closes with S1; the last with
        # S(1 + 1 + s), s the buffer element's own stop
        refs = bufferize(tok("1 2 S1 3 S2 4 S2"), 1)
        out = streamify(refs, 1, repeat=2)
        assert fmt(out) == "1 2 S1 1 2 S2 3 S1 3 S3 4 S1 4 S3"
        assert to_nested(out, 3) == [[[[1, 2], [1, 2]], [[3], [3]]], [[[4], [4]]]]

    def test_static_repeat_levels_b2(self):
        refs = bufferize(tok("1 2 S1 3 S2 4 S2"), 2)
        out = streamify(refs, 2, repeat=3)
        assert fmt(out) == "1 2 S1 3 S2 1 2 S1 3 S2 1 2 S1 3 S3 4 S2 4 S2 4 S3"
        assert to_nested(out, 3) == [[[[1, 2], [3]]] * 3, [[[4]]] * 3]

    def test_repeat_of_empty_buffers(self):
        # [[]] buffered at b = 1 is one empty buffer with stop S1: three empty replays
        refs = bufferize(tok("S2"), 1)
        assert fmt(refs) == "B0 S1"
        assert fmt(streamify(refs, 1, repeat=3)) == "S1 S1 S3"

    def test_repeat_through_the_interpreter(self):
        p = Program("t")
        x = ragged_input(p, "x", 2)
        sf = Streamify(Bufferize(x, 1), 2)
        assert sf.shape == x.shape[:2] + (2, x.shape[2])
        p.output(sf, "y")
        assert run(p, inputs={"x": EX}).outputs["y"] == [[[[1, 2], [1, 2]], [[3], [3]]], [[[4], [4]]]]

    def test_reference_driven(self):
        # buffers [2, 1] of Buffer([R]); reference [2, K]: each buffer replays once per reference
        # element; the replay closes with S(1 + r), r the reference element's stop
        p = Program("t")
        R, K = p.symbol("R", ragged=True), p.symbol("K", ragged=True)
        x = p.input("x", (2, 1, R), Index())
        ref = p.input("ref", (2, K), Index())
        bz = Bufferize(x, 1)
        assert bz.shape == (2, 1)
        sf = Streamify(bz, ref=ref, expand_rank=1)
        assert sf.shape == (2, K, R)
        p.output(sf, "y")
        r = run(p, inputs={"x": [[[1, 2]], [[3]]], "ref": [[7, 8, 9], [7]]}, keep_edges=True)
        assert fmt(r.edges[sf.out]) == "1 2 S1 1 2 S1 1 2 S2 3 S2"
        assert r.outputs["y"] == [[[1, 2], [1, 2], [1, 2]], [[3]]]

    def test_reference_driven_empty_reference_fibre_consumes_a_buffer(self):
        refs = bufferize(tok("1 2 S2 3 S2 5 S2"), 1)
        assert fmt(refs) == "B0 S1 B1 S1 B2 S1"
        seen = []
        out = streamify(refs, 1, ref=tok("7 S1 S1 8 8 S1"), expand_rank=1, on_last=lambda b: seen.append(b.id))
        assert fmt(out) == "1 2 S2 S2 5 S1 5 S2"
        assert seen == [0, 1, 2]

    def test_reference_driven_rank2_inner_reference_stops(self):
        # expand_rank 2: the reference's S1 stays inside the repetition (raised by the buffer's 1)
        refs = bufferize(tok("1 S3 2 3 S3"), 1)
        assert fmt(refs) == "B0 S2 B1 S2"
        out = streamify(refs, 1, ref=tok("7 7 S1 7 S2 7 S2"), expand_rank=2)
        assert fmt(out) == "1 S1 1 S2 1 S3 2 3 S3"

    @pytest.mark.parametrize("buffers,ref,message", [
        ("5 S2 6 S2", "7 S1 8 S1", "reference stop S1 at beat 0 ends a repetition, but the buffer "
                                   "stream shows stop S2 at beat 0"),
        ("5 S1 6 S1", "7 S2", "reference stop S2 at beat 0 ends a repetition, but the buffer stream "
                              "shows stop S1 at beat 0"),
        ("5 6 S1", "7 S1 8 S1", "reference stop S1 at beat 0 ends a repetition, but the buffer "
                                "stream shows a buffer at beat 1"),
        ("5 S1 6 S1", "7 S1", "the reference ended but the buffer stream has 2 more tokens"),
        ("5 S1", "7 S1 8 S1", "reference element at beat 1 needs a buffer, but the buffer stream "
                              "shows the end of the buffers"),
        ("S1 5 S1", "7 S1", "reference element at beat 0 needs a buffer, but the buffer stream "
                            "shows stop S1 at beat 0"),
    ])
    def test_reference_mismatch(self, buffers, ref, message):
        # buffer streams written directly: each number is a buffer holding that one element
        ids = iter(range(100))
        refs = [t if is_stop(t) else BufferRef(next(ids), [t]) for t in tok(buffers)]
        with pytest.raises(StepRuntimeError) as e:
            streamify(refs, 1, ref=tok(ref), expand_rank=1, op="Sf")
        assert str(e.value) == f"Sf: {message}"

    def test_transposed_replay(self):
        p = Program("t")
        x = p.input("x", (1, 2, 3), Index())
        sf = Streamify(Bufferize(x, 2), order=((3, 2), (1, 3)))
        assert sf.shape == (1, 3, 2)
        sf2 = Streamify(Bufferize(x, 2), 2, order=((3, 2), (1, 3)))
        assert sf2.shape == (1, 2, 3, 2)
        p.output(sf, "t")
        p.output(sf2, "t2")
        r = run(p, inputs={"x": [[[1, 2, 3], [4, 5, 6]]]}, keep_edges=True)
        assert fmt(r.edges[sf.out]) == "1 4 S1 2 5 S1 3 6 S2"
        assert r.outputs["t"] == [[[1, 4], [2, 5], [3, 6]]]
        assert r.outputs["t2"] == [[[[1, 4], [2, 5], [3, 6]]] * 2]

    def test_strided_replay_with_offset(self):
        # the second column of a [2, 3] buffer, then every other element backwards
        refs = bufferize(tok("1 2 3 S1 4 5 6 S2"), 2)
        assert fmt(streamify(refs, 2, order=((2,), (3,), 1), shape=(2, 3))) == "2 5 S1"
        assert fmt(streamify(refs, 2, order=((3,), (-2,), 5), shape=(2, 3))) == "6 4 2 S1"

    def test_ordered_replay_needs_a_full_buffer(self):
        refs = bufferize(tok("1 2 3 S1 4 5 S2"), 2)
        with pytest.raises(StepRuntimeError) as e:
            streamify(refs, 2, order=((3, 2), (1, 3), 0), shape=(2, 3), op="Sf")
        assert str(e.value) == ("Sf: buffer 0 at beat 0 does not fill its static shape [2, 3] "
                                "(fibre sizes per dimension [[2], [2, 3]]); an affine replay order "
                                "needs it full")


@settings(deadline=None, max_examples=300)
@given(st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r), ragged(r))))
def test_bufferize_streamify_round_trip(case):
    rank, b, tensors = case
    tokens = from_nested(tensors, rank)
    refs = bufferize(tokens, b)
    assert to_nested(refs, rank - b) is not None  # a well-formed rank-(rank - b) stream
    for r in refs:
        if not is_stop(r):
            to_nested(r.tokens, b - 1)
    assert streamify(refs, b) == tokens


def _repeat_runs(tensors, rank, b, n):
    """``tensors`` with every level-``b`` run ``x`` replaced by ``[x] * n``."""
    def go(x, level):
        if level == b:
            return [x] * n
        return [go(c, level - 1) for c in x]
    return [go(t, rank) for t in canonical(tensors, rank)]


@settings(deadline=None, max_examples=200)
@given(st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r), st.integers(1, 3),
                                                     ragged(r))))
def test_static_repeat_replays_each_run(case):
    rank, b, n, tensors = case
    out = streamify(bufferize(from_nested(tensors, rank), b), b, repeat=n)
    assert out == from_nested(_repeat_runs(tensors, rank, b, n), rank + 1)


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r), ragged(r))))
def test_round_trip_through_the_interpreter(case):
    rank, b, tensors = case
    p = Program("t")
    x = ragged_input(p, "x", rank)
    bz = Bufferize(x, b)
    sf = Streamify(bz)
    assert sf.shape == x.shape
    p.output(sf, "y")
    nodes = list(stepped(p, {"x": tensors}))
    ctx = nodes[-1][1]
    assert run(p, inputs={"x": tensors}).outputs["y"] == canonical(tensors, rank)
    n = ctx.next_buffer_id
    assert freed(ctx) == list(range(n)) and ctx.live_buffers == {}


class TestLifetimes:
    def test_freed_after_the_last_replay(self):
        refs = bufferize(tok("1 S1 2 S1 3 S1"), 1)
        seen = []
        streamify([refs[0], refs[1], refs[0], refs[2]], 1, on_last=lambda r: seen.append(r.id))
        assert seen == [1, 0, 2]

    def test_each_buffer_is_freed_after_its_repeated_references(self):
        p = Program("t")
        x = ragged_input(p, "x", 1)
        bz = Bufferize(x, 1)
        sf = Streamify(RepeatStatic(bz, 2))
        p.output(sf, "y")
        assert streamify_consumers(p, bz.out) == {sf.name}
        trace = [(n.name, list(freed(c)), sorted(c.live_buffers)) for n, c in stepped(p, {"x": [[1], [2, 3]]})]
        assert trace[1] == (bz.name, [], [0, 1])
        assert trace[1 + 2] == (sf.name, [0, 1], [])
        assert run(p, inputs={"x": [[1], [2, 3]]}).outputs["y"] == [[[1], [1]], [[2, 3], [2, 3]]]

    def test_fan_out_frees_after_every_consumer(self):
        p = Program("t")
        x = ragged_input(p, "x", 1)
        bz = Bufferize(x, 1)
        a = Streamify(bz, name="a")
        b = Streamify(bz, 2, name="b")
        p.output(a, "ya")
        p.output(b, "yb")
        assert streamify_consumers(p, bz.out) == {"a", "b"}
        snap = {}
        for node, ctx in stepped(p, {"x": [[1, 2], [3]]}):
            snap[node.name] = (list(freed(ctx)), {i: rec.refcount for i, rec in ctx.live_buffers.items()})
        assert snap[bz.name] == ([], {0: 2, 1: 2})
        assert snap["a"] == ([], {0: 1, 1: 1})
        assert snap["b"] == ([0, 1], {})

    def test_fan_out_through_an_inserted_broadcast(self):
        from stepforge.compiler.ops.routing import Broadcast
        from stepforge.compiler.passes import insert_broadcasts
        p = Program("t")
        bz = Bufferize(ragged_input(p, "x", 1), 1)
        a, b = Streamify(bz, name="a"), Streamify(bz, 3, name="b")
        p.output(a, "ya")
        p.output(b, "yb")
        insert_broadcasts(p)
        assert isinstance(a.inputs[0].node, Broadcast) and a.inputs[0].node is b.inputs[0].node
        assert streamify_consumers(p, bz.out) == {"a", "b"}
        snap = {n.name: list(freed(c)) for n, c in stepped(p, {"x": [[1, 2], [3]]})}
        assert snap["a"] == [] and snap["b"] == [0, 1]
        r = run(p, inputs={"x": [[1, 2], [3]]})
        assert r.outputs["ya"] == [[1, 2], [3]]
        assert r.outputs["yb"] == [[[1, 2]] * 3, [[3]] * 3]

    def test_partitioned_buffers_are_freed_by_the_consumer_that_replays_them(self):
        # buffers 0 and 2 go to "a", buffer 1 to "b": "a" frees nothing alone (b may still
        # receive 0 and 2 until it has run); "b" frees 1 at its replay, then 0 and 2 at its end
        from stepforge.compiler.ops.routing import Partition
        from stepforge.compiler.types import Select
        p = Program("t")
        R = p.symbol("R", ragged=True)
        bz = Bufferize(p.input("x", (3, R), Index()), 1)
        part = Partition(bz, p.input("sel", (3,), Select(2)), 2, 0)
        a, b = Streamify(part[0], name="a"), Streamify(part[1], name="b")
        p.output(a, "ya")
        p.output(b, "yb")
        inputs = {"x": [[1], [2, 3], [4]], "sel": [1, 2, 1]}
        snap = {n.name: (list(freed(c)), sorted(c.live_buffers)) for n, c in stepped(p, inputs)}
        assert snap["a"] == ([], [0, 1, 2])
        assert snap["b"] == ([1, 0, 2], [])
        r = run(p, inputs=inputs)
        assert r.outputs["ya"] == [[1], [4]] and r.outputs["yb"] == [[2, 3]]

    def test_a_consumer_that_never_receives_a_buffer_releases_it_at_its_end(self):
        # as after a Partition: buffer 1 is routed to another consumer, never to "a"
        from stepforge.sim.ref.ops_memory import LiveBuffer
        p = Program("t")
        bz = Bufferize(ragged_input(p, "x", 1), 1)
        a = Streamify(bz, name="a")
        ctx = Context(p, {}, {})
        ctx.live_buffers = {0: LiveBuffer(bz.name, [1], {"a"}), 1: LiveBuffer(bz.name, [2], {"a", "b"}),
                            2: LiveBuffer(bz.name, [3], {"a"})}
        (out,) = SEMANTICS[Streamify](a, [[BufferRef(2, [3]), BufferRef(0, [1])]], ctx)
        assert out == [3, stop(1), 1, stop(1)]
        assert freed(ctx) == [2, 0]
        assert {i: rec.pending for i, rec in ctx.live_buffers.items()} == {1: {"b"}}

    def test_replaying_a_freed_buffer_is_an_error(self):
        p = Program("t")
        a = Streamify(Bufferize(ragged_input(p, "x", 1), 1), name="a")
        with pytest.raises(StepRuntimeError) as e:
            SEMANTICS[Streamify](a, [[BufferRef(0, [1]), stop(1)]], Context(p, {}, {}))
        assert str(e.value) == "a: buffer 0 at beat 0 is not live (already freed)"

    def test_a_buffer_no_streamify_reads_stays_live(self):
        p = Program("t")
        x = ragged_input(p, "x", 1)
        kept = Bufferize(x, 1, name="kept")
        p.output(kept, "refs")
        *_, (node, ctx) = stepped(p, {"x": [[1], [2]]})
        assert streamify_consumers(p, kept.out) == set()
        assert freed(ctx) == [] and sorted(ctx.live_buffers) == [0, 1]
        assert ctx.live_buffers[0].owner == "kept" and ctx.live_buffers[0].refcount == 0


# -- malformed programs -----------------------------------------------------------------------

def prog():
    p = Program("bad")
    B = p.symbol("B", bound=16)
    x = p.input("x", [2, B, 4], Tile(int16, 1, 1))
    y = p.input("y", [2, 3], Index())
    return p, x, y, B


def bufs(x):
    return Bufferize(x, 1, name="bz")


CASES = [
    ("bufferize b = 0", StepShapeError,
     "Bufferize_0: port 'in0' needs b in 1..2 (the input's rank), got 0 (input shape [2, B, 4])",
     lambda p, x, y, B: Bufferize(x, 0)),
    ("bufferize b above rank", StepShapeError,
     "Bufferize_0: port 'in0' needs b in 1..1 (the input's rank), got 2 (input shape [2, 3])",
     lambda p, x, y, B: Bufferize(y, 2)),
    ("bufferize rank 0", StepShapeError,
     "Bufferize_0: port 'in0' needs b in 1..0 (the input's rank), got 1 (input shape [5])",
     lambda p, x, y, B: Bufferize(p.input("z", [5], Index()), 1)),
    ("bufferize buffers", StepTypeError,
     "Bufferize_0: port 'in0' cannot bufferize buffer references: Buffer(Tile(int16, 1, 1), [4]) [2, B]",
     lambda p, x, y, B: Bufferize(bufs(x), 1)),
    ("streamify non-buffers", StepTypeError,
     "Streamify_0: port 'buffers' expects a stream of Buffer, got Index() [2, 3]",
     lambda p, x, y, B: Streamify(y)),
    ("repeat 0", StepShapeError,
     "Streamify_0: port 'buffers' needs repeat >= 1, got 0 (buffers [2, B] of Buffer(Tile(int16, 1, 1), [4]))",
     lambda p, x, y, B: Streamify(bufs(x), 0)),
    ("repeat and ref", StepShapeError,
     "Streamify_0: port 'ref' takes either repeat or ref, not both (buffers [2, B], ref [2, 3])",
     lambda p, x, y, B: Streamify(bufs(x), 2, ref=y, expand_rank=1)),
    ("ref without expand_rank", StepShapeError,
     "Streamify_0: port 'ref' ref needs expand_rank (buffers [2, B], ref [2, 3])",
     lambda p, x, y, B: Streamify(bufs(x), ref=y)),
    ("expand_rank without ref", StepShapeError,
     "Streamify_0: port 'ref' expand_rank needs ref (buffers [2, B])",
     lambda p, x, y, B: Streamify(bufs(x), expand_rank=1)),
    ("ref rank", StepShapeError,
     "Streamify_0: port 'ref' must have the rank of the buffers: buffers [2, B] vs ref [2, B, 4]",
     lambda p, x, y, B: Streamify(bufs(x), ref=x, expand_rank=1)),
    ("expand_rank range", StepShapeError,
     "Streamify_0: port 'ref' needs expand_rank in 1..1, got 2: buffers [2, B] vs ref [2, 3]",
     lambda p, x, y, B: Streamify(bufs(x), ref=y, expand_rank=2)),
    ("trailing dims not 1", StepShapeError,
     "Streamify_0: port 'buffers' needs its 1 innermost dimensions to be 1: buffers [2, B] vs ref [2, 3]",
     lambda p, x, y, B: Streamify(bufs(x), ref=y, expand_rank=1)),
    ("outer dims differ", StepShapeError,
     "Streamify_0: port 'ref' must match the buffers outside the 1 expanded dimensions: buffers [3, 1] vs ref [2, 3]",
     lambda p, x, y, B: Streamify(Bufferize(p.input("z", [3, 1, 4], Index()), 1), ref=y, expand_rank=1)),
    ("order on a dynamic buffer", StepShapeError,
     "Streamify_0: port 'buffers' needs a static buffer shape for an affine order, got buffer [B, 4]",
     lambda p, x, y, B: Streamify(Bufferize(x, 2), order=((4,), (1,)))),
    ("order past the end", StepShapeError,
     "Streamify_0: port 'buffers' replays element 6, outside buffer [2, 3] of 6 elements (out_shape [3, 2], "
     "stride [1, 4], offset 0)",
     lambda p, x, y, B: Streamify(Bufferize(p.input("z", [1, 2, 3], Index()), 2), order=((3, 2), (1, 4)))),
    ("order stride length", StepShapeError,
     "Streamify_0: port 'buffers' needs one int stride per order dimension and an int offset",
     lambda p, x, y, B: Streamify(Bufferize(y, 1), order=((3,), (1, 1)))),
    ("buffers of another program", StepShapeError,
     "Streamify_0: port 'ref' is a stream of another program",
     lambda p, x, y, B: Streamify(bufs(x), ref=Program("q").input("r", [2, 3], Index()), expand_rank=1)),
]


@pytest.mark.parametrize("what,error,message,build", CASES, ids=[c[0] for c in CASES])
def test_malformed(what, error, message, build):
    p, x, y, B = prog()
    with pytest.raises(error) as info:
        build(p, x, y, B)
    assert message in str(info.value)
    assert str(info.value).split(":")[0] == info.value.op
    assert info.value.op not in [n.name for n in p.nodes]  # the failed node is not added


def test_hand_example_formats():
    # the tokens of a replayed buffer of tiles keep the tiles themselves (no copies are made)
    t = np.arange(4, dtype=np.int16).reshape(2, 2)
    refs = bufferize([t, t + 1, stop(1)], 1)
    out = streamify(refs, 1, repeat=2)
    assert format_tokens(out) == "tile[2, 2] tile[2, 2] S1 tile[2, 2] tile[2, 2] S2 Done"
    assert out[0] is t and out[3] is t and out[4] is out[1]
