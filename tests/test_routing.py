"""Routing operators: hand-worked examples of spec section 4, run-time errors, malformed programs
and the Partition/Reassemble and EagerMerge properties (see docs/routing.md)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError, StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from stepforge.compiler.ops.shape import Flatten, Zip
from stepforge.compiler.passes import insert_broadcasts
from stepforge.compiler.types import Index, Select, Tile, fp32, int32
from stepforge.contract.tokens import canonical, format_tokens, from_nested, stop, to_nested
from stepforge.sim.ref.eager import check_eager_merge
from stepforge.sim.ref.interpreter import run
from stepforge.sim.ref.ops_routing import (broadcast, eager_merge, iter_chunks, parallelize, partition,
                                       reassemble)
from stepforge.sim.ref.ops_shape import flatten, promote

EX = [[[1, 2], [3]], [[4], [5, 6, 7]]]  # the rank-2 example of spec section 2


def tok(s):
    """Tokens from the spec's notation: '1 2 S1 3 S2' (Done implicit)."""
    return [stop(int(w[1:])) if w.startswith("S") else int(w) for w in s.split()]


def fmt(tokens):
    return format_tokens(tokens)[:-len(" Done")] if tokens else ""


def program_with(*specs, dtype=Index()):
    """A program with one host input per ``(name, rank or shape, dtype)`` spec, ragged dims."""
    p = Program("t")
    streams = []
    for name, shape, *dt in specs:
        if isinstance(shape, int):
            shape = [p.symbol(f"{name}_d{k}", ragged=True) for k in range(shape + 1)]
        streams.append(p.input(name, shape, dt[0] if dt else dtype))
    return p, streams


# -- Partition ---------------------------------------------------------------------------------

class TestPartition:
    def test_one_hot_rank0(self):
        outs = partition(tok("1 2 3 4 5"), [1, 2, 1, 4, 1], 3, 0)
        assert [fmt(o) for o in outs] == ["1 3 5", "2", "4"]

    def test_b0_selector_stops_align_with_data_stops(self):
        # data [[1, 2], [3]], selector [[1, 2], [2]]
        outs = partition(tok("1 2 S1 3 S1"), tok("1 2 S1 2 S1"), 2, 0, rank=1)
        assert [fmt(o) for o in outs] == ["1", "2 3"]

    def test_multi_hot_copies_and_an_output_that_receives_nothing(self):
        p = Program("t")
        T = p.symbol("T", bound=8)
        x = p.input("x", [T], Index())
        s = p.input("s", [T], Select(3))
        part = Partition(x, s, 3, 0, name="route")
        for i in range(3):
            p.output(part[i], f"e{i}")
        res = run(p, inputs={"x": [10, 11, 12], "s": [0b011, 0b001, 0b011]})
        assert res.outputs == {"e0": [10, 11, 12], "e1": [10, 12], "e2": []}
        # the empty output is a bare Done; its count symbol was observed as 0
        assert res.trace[part[2].shape[0]] == [0]
        assert res.trace[part[0].shape[0]] == [3]

    def test_b1_one_hot_on_the_spec_example(self):
        data = from_nested(EX, 2)
        sel = from_nested([[1, 2], [2, 1]], 1)
        assert fmt(sel) == "1 2 S1 2 1 S1"
        out0, out1 = partition(data, sel, 2, 1, rank=2)
        assert fmt(out0) == "1 2 S1 5 6 7 S1"
        assert fmt(out1) == "3 S1 4 S1"
        assert to_nested(out0, 1) == [[1, 2], [5, 6, 7]]
        assert to_nested(out1, 1) == [[3], [4]]

    def test_b1_multi_hot_with_an_empty_chunk(self):
        # data [[1], [], [2, 3]]: the empty row is a chunk of its own
        outs = partition(tok("1 S1 S1 2 3 S1"), [0b11, 0b10, 0b01], 2, 1, rank=1)
        assert [fmt(o) for o in outs] == ["1 S1 2 3 S1", "1 S1 S1"]
        assert to_nested(outs[1], 1) == [[1], []]

    def test_b2_routes_whole_tensors(self):
        outs = partition(from_nested(EX, 2), [2, 1], 2, 2, rank=2)
        assert [fmt(o) for o in outs] == ["4 S1 5 6 7 S2", "1 2 S1 3 S2"]

    def test_selector_empty_fibres_meet_data_stop_only_beats(self):
        # b = 0: data [[], [1]], selector [[], [1]]
        assert [fmt(o) for o in partition(tok("S1 1 S1"), tok("S1 1 S1"), 1, 0, rank=1)] == ["1"]
        # b = 1: data [[[5]], []] (second tensor without rows), selector [[1], []]
        data = from_nested([[[5]], []], 2)
        assert fmt(data) == "5 S2 S2"
        sel = from_nested([[1], []], 1)
        assert fmt(sel) == "1 S1 S1"
        assert [fmt(o) for o in partition(data, sel, 1, 1, rank=2)] == ["5 S1"]

    def test_zero_mask_drops_the_chunk(self):
        assert [fmt(o) for o in partition(tok("1 2 3"), [1, 0, 2], 2, 0)] == ["1", "3"]

    def test_zero_mask_with_drop_false_is_an_error(self):
        with pytest.raises(StepRuntimeError) as e:
            partition(tok("1 2 3"), [1, 0, 2], 2, 0, op="route", drop=False)
        assert str(e.value) == ("route: the selector element at beat 1 names no output and "
                                "drop=False (its chunk ends at data beat 1)")
        assert (e.value.op, e.value.port, e.value.beat) == ("route", "select", 1)

    def test_through_the_interpreter_with_tiles(self):
        p = Program("t")
        T = p.symbol("T", bound=4)
        x = p.input("x", [T, 2], Tile(int32, 1, 2))  # rank 1: T rows of 2 tiles
        s = p.input("s", [T], Select(2))
        part = Partition(x, s, 2, 1)
        assert part.output_names == ("out0", "out1")
        assert part[0].shape[1] == 2 and part[0].rank == 1
        p.output(part[0], "a")
        p.output(part[1], "b")
        rows = [[[[1, 2]], [[3, 4]]], [[[5, 6]], [[7, 8]]], [[[9, 9]], [[0, 0]]]]
        res = run(p, inputs={"x": rows, "s": [1, 2, 3]})
        a, b = res.outputs["a"], res.outputs["b"]
        assert [[t.tolist() for t in row] for row in a] == [[[[1, 2]], [[3, 4]]], [[[9, 9]], [[0, 0]]]]
        assert [[t.tolist() for t in row] for row in b] == [[[[5, 6]], [[7, 8]]], [[[9, 9]], [[0, 0]]]]

    def test_shape_and_shared_symbols(self):
        p = Program("t")
        B = p.symbol("B", bound=16)
        x = p.input("x", [B, 3, 4], Index())
        s = p.input("s", [B, 3], Select(4))
        part = Partition(x, s, 4, 1)
        assert [o.shape[1:] for o in part.outputs] == [(4,)] * 4
        syms = [o.shape[0] for o in part.outputs]
        assert len(set(syms)) == 4
        assert all(p.symbols.bound(d) == 48 for d in syms)
        assert all(p.symbols.info(d).kind == "dynamic" for d in syms)
        # a second Partition by the same selector stream shares the counts: zip works
        w = p.input("w", [B, 3, 4], Tile(fp32, 1, 1))
        part_w = Partition(w, s, 4, 1)
        assert [o.shape for o in part_w.outputs] == [o.shape for o in part.outputs]
        Zip(part[2], part_w[2])
        # another selector gets its own counts
        s2 = p.input("s2", [B, 3], Select(4))
        assert Partition(x, s2, 4, 1)[0].shape[0] != syms[0]

    def test_unknown_selector_bound_gives_an_unbounded_count(self):
        p = Program("t")
        B = p.symbol("B")
        x = p.input("x", [B], Index())
        s = p.input("s", [B], Select(2))
        assert p.symbols.bound(Partition(x, s, 2, 0)[0].shape[0]) is None

    def test_user_symbol_with_the_count_name_is_not_reused(self):
        p = Program("t")
        B = p.symbol("B", bound=3)
        user = p.symbol("N_s_0", bound=99)
        x = p.input("x", [B], Index())
        s = p.input("s", [B], Select(2))
        d = Partition(x, s, 2, 0)[0].shape[0]
        assert d != user and p.symbols.bound(d) == 3

    def test_routing_nodes_hold_no_memory(self):
        p = Program("t")
        B = p.symbol("B", bound=3)
        x = p.input("x", [B], Index())
        s = p.input("s", [B], Select(2))
        part = Partition(x, s, 2, 0)
        nodes = [part, Reassemble(part, s, 0), EagerMerge(part, 0), Broadcast(x, 2),
                 Parallelize(x, 2, 0)]
        assert [(n.onchip_bytes(), n.flops()) for n in nodes] == [(0, 0)] * 5


class TestPartitionErrors:
    def test_selector_and_data_stop_mismatch(self):
        # data [[1, 2], [3]] but selector [[1, 1, 1]]: the second chunk ends a row too early
        with pytest.raises(StepRuntimeError) as e:
            partition(tok("1 2 S1 3 S1"), tok("1 1 1 S1"), 2, 0, op="route", rank=1)
        assert str(e.value) == ("route: stop mismatch at data beat 1: the selector element at beat "
                                "1 carries no stop, so its data chunk must end with no stop, but it "
                                "ends with S1")
        assert (e.value.op, e.value.port, e.value.beat) == ("route", "in0", 1)

    def test_stop_mismatch_through_the_interpreter(self):
        p = Program("t")
        R = p.symbol("R", ragged=True)
        T = p.symbol("T")
        x = p.input("x", [T, R], Index())
        s = p.input("s", [T, R], Select(2))
        Partition(x, s, 2, 0, name="route")
        with pytest.raises(StepRuntimeError) as e:
            run(p, inputs={"x": [[1, 2], [3]], "s": [[1], [2, 2]]})
        assert str(e.value) == ("route: stop mismatch at data beat 0: the selector element at beat "
                                "0 carries S1, so its data chunk must end with S1, but it ends with "
                                "no stop")
        assert e.value.beat == 0

    def test_b1_stop_mismatch(self):
        # b = 1: selector element with S1 needs a chunk ending with S2
        with pytest.raises(StepRuntimeError, match=r"^route: stop mismatch at data beat 1: the "
                           r"selector element at beat 0 carries S1, so its data chunk must end "
                           r"with S2, but it ends with S1$"):
            partition(tok("1 2 S1 3 S2"), tok("1 S1 1 S1"), 1, 1, op="route", rank=2)

    def test_selector_empty_fibre_against_a_data_element(self):
        with pytest.raises(StepRuntimeError, match=r"^route: stop mismatch at data beat 0: the "
                           r"selector's stop-only S1 at beat 0 \(an empty fibre\) needs a stop-only "
                           r"S1 on the data, but the data shows an element with S1$"):
            partition(tok("1 S1"), tok("S1"), 1, 0, op="route", rank=1)

    def test_selector_element_against_a_data_empty_fibre(self):
        with pytest.raises(StepRuntimeError, match=r"^route: stop mismatch at data beat 0: the "
                           r"selector element at beat 0 needs a data element, but the data shows a "
                           r"stop-only S1$"):
            partition(tok("S1"), tok("1 S1"), 1, 0, op="route", rank=1)

    def test_data_ends_early(self):
        p = Program("t")
        T = p.symbol("T")
        x = p.input("x", [T], Index())
        s = p.input("s", [T], Select(2))
        Partition(x, s, 2, 0, name="route")
        with pytest.raises(StepRuntimeError) as e:
            run(p, inputs={"x": [7, 8], "s": [1, 2, 1]})
        assert str(e.value) == ("route: the data stream ended early (Done at beat 1): the selector "
                                "element at beat 2 has no data chunk")
        assert (e.value.op, e.value.port, e.value.beat) == ("route", "in0", 1)

    def test_empty_data_ends_at_beat_0(self):
        with pytest.raises(StepRuntimeError, match=r"^route: the data stream ended early \(Done at "
                           r"beat 0\): the selector element at beat 0 has no data chunk$"):
            partition([], [1], 1, 0, op="route")

    def test_data_left_over(self):
        with pytest.raises(StepRuntimeError) as e:
            partition(tok("1 2 3"), [1, 1], 1, 0, op="route")
        assert str(e.value) == ("route: the selector ended (Done at beat 1) but the data goes on at "
                                "beat 2 (1 token left)")
        assert e.value.beat == 2

    def test_mask_out_of_range(self):
        with pytest.raises(StepRuntimeError, match=r"^route: selector element at beat 1 is 8, not "
                           r"a mask of 3 bits$"):
            partition(tok("1 2"), [1, 8], 3, 0, op="route")

    def test_stop_above_the_data_rank(self):
        with pytest.raises(StepRuntimeError, match=r"^route: stop S2 at beat 0 of in0 is above the "
                           r"stream's rank 1$"):
            partition(tok("1 S2"), tok("1 S1"), 1, 0, op="route", rank=1)

    def test_data_ends_inside_a_chunk(self):
        with pytest.raises(StepRuntimeError, match=r"^route: in0 ends inside a chunk at beat 1: the "
                           r"chunk that starts at beat 0 has no closing stop >= S1$"):
            partition(tok("1 2"), [1], 1, 1, op="route")


# -- Reassemble --------------------------------------------------------------------------------

class TestReassemble:
    def test_b0_groups_in_ascending_input_index(self):
        # in1 is listed first in the selector's masks' time order, ascending index decides
        out = reassemble([tok("1 2"), tok("10 20")], [0b11, 0b10, 0b01], 0)
        assert fmt(out) == "1 10 S1 20 S1 2 S1"
        assert to_nested(out, 1) == [[1, 10], [20], [2]]

    def test_zero_mask_gives_an_empty_group(self):
        assert fmt(reassemble([tok("1"), tok("2")], [1, 0, 2], 0)) == "1 S1 S1 2 S1"

    def test_selector_stops_are_raised_above_the_group(self):
        # selector [[1, 2], [], [1]]: the group of the selector's S1 closes with S2; the empty
        # selector fibre becomes a stop-only S2
        sel = from_nested([[1, 2], [], [1]], 1)
        out = reassemble([tok("1 3"), tok("2")], sel, 0, select_rank=1)
        assert fmt(out) == "1 S1 2 S2 S2 3 S2"
        assert to_nested(out, 2) == [[[1], [2]], [[]], [[3]]]

    def test_b1_is_promote_for_a_one_hot_selector(self):
        data = from_nested(EX, 2)
        sel = from_nested([[1, 2], [2, 1]], 1)
        parts = partition(data, sel, 2, 1, rank=2)
        out = reassemble(parts, sel, 1, select_rank=1)
        assert fmt(out) == "1 2 S2 3 S3 4 S2 5 6 7 S3"
        assert out == promote(data, 1, 2)
        assert flatten(out, 1, 2) == data

    def test_b1_multi_hot_empty_chunks(self):
        out = reassemble([tok("1 S1 S1"), tok("S1")], [0b11, 0b01], 1)
        assert fmt(out) == "1 S1 S2 S2"
        assert to_nested(out, 2) == [[[1], []], [[]]]

    def test_shape(self):
        p = Program("t")
        B = p.symbol("B", bound=5)
        x = p.input("x", [B, 3, 2], Index())
        s = p.input("s", [B, 3], Select(3))
        part = Partition(x, s, 3, 1)
        r = Reassemble(part, s, 1, name="join")
        assert r.shape[:2] == (B, 3) and r.shape[3] == 2
        g = r.shape[2]
        assert p.symbols.is_ragged(g) and p.symbols.bound(g) == 3
        assert Reassemble(part, s, 1, count=1).shape == (B, 3, 1, 2)
        assert r.input_names == ("in0", "in1", "in2", "select")

    def test_moe_top2_pure_functions_with_expert_functions(self):
        # 5 tokens (tiles [1, 4]), 4 experts, top-2 routing; expert e multiplies by e + 1
        tokens = [np.full((1, 4), t + 1, dtype=np.float32) for t in range(5)]
        masks = [0b0011, 0b0101, 0b1100, 0b1010, 0b0011]
        routed = partition(tokens, masks, 4, 0, rank=0)
        assert [len(r) for r in routed] == [3, 3, 2, 2]
        processed = [[x * np.float32(e + 1) for x in r] for e, r in enumerate(routed)]
        out = reassemble(processed, masks, 0, count=2, select_rank=0)
        got = [[row[0, 0].item() for row in group] for group in to_nested(out, 1)]
        assert got == [[1.0, 2.0], [2.0, 6.0], [9.0, 12.0], [8.0, 16.0], [5.0, 10.0]]

    def test_moe_top2_program(self):
        p = Program("moe")
        T = p.symbol("T", bound=8)
        x = p.input("x", [T], Tile(fp32, 1, 4))
        g = p.input("g", [T], Tile(fp32, 1, 1))
        sel = p.input("sel", [T], Select(4))
        experts = Partition(x, sel, 4, 0, name="dispatch")
        gates = Partition(g, sel, 4, 0, name="gates")
        for e in range(4):
            Zip(experts[e], gates[e])  # co-partitioned streams align
        y = Reassemble(experts, sel, 0, count=2, name="combine")
        assert y.shape == (T, 2)
        p.output(y, "y")
        p.output(Flatten(y, 0, 1), "flat")
        xs = [[[float(t)] * 4] for t in range(5)]
        masks = [0b0011, 0b0101, 0b1100, 0b1010, 0b0011]
        res = run(p, inputs={"x": xs, "g": [[[0.5]]] * 5, "sel": masks})
        assert [[tile[0, 0].item() for tile in grp] for grp in res.outputs["y"]] == [
            [0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
        assert [t[0, 0].item() for t in res.outputs["flat"]] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]

    def test_count_is_checked_at_run_time(self):
        with pytest.raises(StepRuntimeError, match=r"^join: the selector element at beat 1 names 1 "
                           r"inputs \(0b10\), but count=2$"):
            reassemble([tok("1 2"), tok("3 4")], [0b11, 0b10], 0, op="join", count=2)

    def test_input_ends_early(self):
        with pytest.raises(StepRuntimeError) as e:
            reassemble([tok("1 2"), tok("3")], [0b11, 0b10], 0, op="join")
        assert str(e.value) == ("join: in1 ended early (Done at beat 0): the selector element at "
                                "beat 1 names in1, which has no chunk left")
        assert (e.value.port, e.value.beat) == ("in1", 0)

    def test_input_left_over(self):
        with pytest.raises(StepRuntimeError, match=r"^join: the selector ended \(Done at beat 0\) but "
                           r"in0 has chunks left from beat 1$"):
            reassemble([tok("1 2"), tok("3")], [0b11], 0, op="join")

    def test_input_stop_above_rank(self):
        with pytest.raises(StepRuntimeError, match=r"^join: stop S2 at beat 0 of in0 is above the "
                           r"stream's rank 1$"):
            reassemble([tok("1 S2")], [1], 1, op="join")


# -- EagerMerge and its checker ----------------------------------------------------------------

class TestEagerMerge:
    def test_round_robin_b0(self):
        data, sel = eager_merge([tok("1 2 3"), tok("10"), []], 0)
        assert fmt(data) == "1 10 2 3"
        assert sel == [1, 2, 1, 1]

    def test_b1_forwards_whole_chunks(self):
        ins = [from_nested([[1, 2], [3]], 1), from_nested([[4], []], 1)]
        data, sel = eager_merge(ins, 1)
        assert fmt(data) == "1 2 S1 4 S1 3 S1 S1"
        assert sel == [1, 2, 1, 2]
        assert check_eager_merge(ins, data, sel, 1) == [[tok("1 2 S1"), tok("3 S1")],
                                                        [tok("4 S1"), tok("S1")]]

    def test_checker_accepts_another_arrival_order(self):
        ins = [from_nested([[1, 2], [3]], 1), from_nested([[4], []], 1)]
        data, sel = eager_merge(ins, 1, order=[1, 1, 0, 0])
        assert fmt(data) == "4 S1 S1 1 2 S1 3 S1"
        assert sel == [2, 2, 1, 1]
        check_eager_merge(ins, data, sel, 1)

    def test_checker_rejects_a_corrupted_value(self):
        ins = [tok("1 2 S1 3 S1"), tok("4 S1")]
        data, sel = eager_merge(ins, 1)
        assert fmt(data) == "1 2 S1 4 S1 3 S1"
        bad = list(data)
        bad[5] = 30
        with pytest.raises(AssertionError) as e:
            check_eager_merge(ins, bad, sel, 1, op="merge")
        assert str(e.value) == ("merge check: chunk 1 of in0 (merged chunk 2, data beat 3) differs: "
                                "expected 3 S1 Done, got 30 S1 Done")

    def test_checker_rejects_a_wrong_selector(self):
        ins = [tok("1 2"), tok("5")]
        data, sel = eager_merge(ins, 0)
        assert fmt(data) == "1 5 2" and sel == [1, 2, 1]
        with pytest.raises(AssertionError, match=r"^m check: chunk 1 of in0 \(merged chunk 1, data "
                           r"beat 1\) differs: expected 2 Done, got 5 Done$"):
            check_eager_merge(ins, data, [1, 1, 2], 0, op="m")
        with pytest.raises(AssertionError, match=r"^EagerMerge check: selector element 1 is 3, not "
                           r"a one-hot mask over 2 inputs$"):
            check_eager_merge(ins, data, [1, 3, 1], 0)
        with pytest.raises(AssertionError, match=r"^EagerMerge check: the data has 3 chunks but the "
                           r"selector 2 elements$"):
            check_eager_merge(ins, data, [1, 2], 0)
        with pytest.raises(AssertionError, match=r"^EagerMerge check: the selector attributes 1 "
                           r"chunks to in1, which has 2$"):
            check_eager_merge([tok("1 2"), tok("5 2")], data, sel, 0)

    def test_checker_is_bit_exact(self):
        z, nz = np.zeros((1, 1), np.float32), np.full((1, 1), -0.0, np.float32)
        with pytest.raises(AssertionError, match=r"chunk 0 of in0 \(merged chunk 0, data beat 0\)"):
            check_eager_merge([[z]], [nz], [1], 0)
        check_eager_merge([[z]], [z.copy()], [1], 0)

    def test_checker_rejects_a_split_chunk(self):
        with pytest.raises(AssertionError, match=r"^EagerMerge check: data is not a rank-1 stream: "
                           r"EagerMerge: data ends inside a chunk at beat 1"):
            check_eager_merge([tok("1 2 S1")], tok("1 2"), [1], 1)

    def test_through_the_interpreter(self):
        p = Program("t")
        A, B = p.symbol("A", bound=4), p.symbol("B", bound=3)
        x = p.input("x", [A, 2], Tile(int32, 1, 1))
        y = p.input("y", [B, 2], Tile(int32, 1, 1))
        m = EagerMerge([x, y], 1, name="merge")
        assert m.output_names == ("data", "select")
        assert m[0].shape == (A + B, 2)
        assert m[1].shape == (A + B,) and m[1].dtype == Select(2)
        p.output(m[0], "d")
        p.output(m[1], "s")
        xs = [[[[1]], [[2]]], [[[3]], [[4]]]]
        ys = [[[[5]], [[6]]]]
        res = run(p, inputs={"x": xs, "y": ys}, keep_edges=True)
        assert res.outputs["s"] == [1, 2, 1]
        assert [[t.item() for t in row] for row in res.outputs["d"]] == [[1, 2], [5, 6], [3, 4]]
        check_eager_merge([res.edges[x], res.edges[y]], res.edges[m[0]], res.edges[m[1]], 1)

    def test_order_must_take_every_chunk(self):
        with pytest.raises(ValueError, match=r"^EagerMerge: order takes 1 of the 2 chunks of in0$"):
            eager_merge([tok("1 2")], 0, order=[0])

    def test_stop_above_rank(self):
        with pytest.raises(StepRuntimeError, match=r"^merge: stop S1 at beat 0 of in1 is above the "
                           r"stream's rank 0$"):
            eager_merge([tok("1"), tok("2 S1")], 0, op="merge")


# -- Broadcast and Parallelize -----------------------------------------------------------------

class TestBroadcast:
    def test_copies(self):
        outs = broadcast(tok("1 S1 S2"), 3)
        assert [fmt(o) for o in outs] == ["1 S1 S2"] * 3
        assert outs[0] is not outs[1]

    def test_node_and_interpreter(self):
        p, (x,) = program_with(("x", 2))
        bc = Broadcast(x, 2)
        assert bc.output_names == ("out0", "out1")
        assert [o.shape for o in bc.outputs] == [x.shape, x.shape]
        p.output(bc[0], "a")
        p.output(bc[1], "b")
        res = run(p, inputs={"x": EX})
        assert res.outputs == {"a": EX, "b": EX}

    def test_inserted_on_fan_out(self):
        p, (x,) = program_with(("x", 1))
        p.output(x, "a")
        p.output(x, "b")
        insert_broadcasts(p)
        assert sum(isinstance(n, Broadcast) for n in p.nodes) == 1
        assert run(p, inputs={"x": [[1], [2, 3]]}).outputs == {"a": [[1], [2, 3]], "b": [[1], [2, 3]]}


class TestParallelize:
    def test_b0_round_robin(self):
        assert [fmt(o) for o in parallelize(tok("0 1 2 3 4 5"), 3, 0)] == ["0 3", "1 4", "2 5"]

    def test_b0_flattens_structure_and_drops_empty_fibres(self):
        assert [fmt(o) for o in parallelize(tok("0 1 S1 S1 2 S2 3 S2"), 2, 0)] == ["0 2", "1 3"]

    def test_b1_chunks_of_flattened_outer_dims(self):
        data = from_nested([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], 2)
        outs = parallelize(data, 2, 1, rank=2)
        assert [fmt(o) for o in outs] == ["1 2 S1 5 6 S1", "3 4 S1 7 8 S1"]

    def test_static_shapes(self):
        p = Program("t")
        x = p.input("x", [2, 2, 2], Index())
        par = Parallelize(x, 2, 1)
        assert par.output_names == ("out0", "out1")
        assert [o.shape for o in par.outputs] == [(2, 2), (2, 2)]
        p.output(par[0], "a")
        p.output(par[1], "b")
        res = run(p, inputs={"x": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]})
        assert res.outputs == {"a": [[1, 2], [5, 6]], "b": [[3, 4], [7, 8]]}

    def test_symbolic_count_may_be_uneven(self):
        p = Program("t")
        T = p.symbol("T", bound=9)
        x = p.input("x", [T], Index())
        par = Parallelize(x, 2, 0)
        d0, d1 = par[0].shape[0], par[1].shape[0]
        assert d0 != d1 and p.symbols.bound(d0) == p.symbols.bound(d1) == 5
        p.output(par[0], "a")
        p.output(par[1], "b")
        res = run(p, inputs={"x": [0, 1, 2, 3, 4]})
        assert res.outputs == {"a": [0, 2, 4], "b": [1, 3]}
        assert res.trace[d0] == [3] and res.trace[d1] == [2]


# -- malformed programs ------------------------------------------------------------------------

class TestMalformed:
    def setup_method(self):
        p = Program("bad")
        self.p = p
        self.B = p.symbol("B", bound=4)
        self.x = p.input("x", [self.B, 3], Index())
        self.s = p.input("s", [self.B], Select(2))

    def test_partition_selector_element_type(self):
        idx = self.p.input("i", [self.B], Index())
        with pytest.raises(StepTypeError) as e:
            Partition(self.x, idx, 2, 1, name="route")
        assert str(e.value) == ("route: port 'select' needs a stream of Select(2), got Index() of "
                                "shape [B] (data [B, 3])")
        assert (e.value.op, e.value.port) == ("route", "select")

    def test_partition_selector_width(self):
        with pytest.raises(StepTypeError, match=r"^route: port 'select' needs a stream of "
                           r"Select\(3\), got Select\(2\) of shape \[B\] \(data \[B, 3\]\)$"):
            Partition(self.x, self.s, 3, 1, name="route")

    def test_partition_selector_rank(self):
        with pytest.raises(StepShapeError) as e:
            Partition(self.x, self.s, 2, 0, name="route")
        assert str(e.value) == ("route: port 'select' must have the data's dimensions above b=0 "
                                "([B, 3] of data [B, 3]), got [B]")
        assert e.value.port == "select"

    def test_partition_selector_dims(self):
        C = self.p.symbol("C")
        s = self.p.input("s2", [C], Select(2))
        with pytest.raises(StepShapeError, match=r"^route: port 'select' must have the data's "
                           r"dimensions above b=1 \(\[B\] of data \[B, 3\]\), got \[C\]$"):
            Partition(self.x, s, 2, 1, name="route")

    def test_partition_b_out_of_range(self):
        with pytest.raises(StepShapeError, match=r"^route: port 'in0' needs b in 0\.\.1, got 2 "
                           r"\(input shape \[B, 3\]\)$"):
            Partition(self.x, self.s, 2, 2, name="route")

    def test_partition_no_outputs(self):
        with pytest.raises(StepShapeError, match=r"^route: port 'in0' needs n in >= 1, got 0"):
            Partition(self.x, self.s, 0, 1, name="route")

    def test_multi_output_node_where_a_stream_is_expected(self):
        part = Partition(self.x, self.s, 2, 1, name="route")
        with pytest.raises(StepTypeError, match=r"^again: port 'in0' expects a stream, got node "
                           r"route with 2 outputs"):
            Partition(part, self.s, 2, 1, name="again")

    def test_reassemble_inner_dims(self):
        y = self.p.input("y", [self.B, 4], Index())
        with pytest.raises(StepShapeError) as e:
            Reassemble([self.x, y], self.s, 1, name="join")
        assert str(e.value) == ("join: port 'in1' must have the inner dimensions of in0: in0 "
                                "[B, 3] vs in1 [B, 4]")
        assert e.value.port == "in1"

    def test_reassemble_element_types(self):
        y = self.p.input("y", [self.B, 3], Tile(fp32, 1, 1))
        with pytest.raises(StepTypeError, match=r"^join: port 'in1' must carry the element type of "
                           r"in0: in0 Index\(\) \[B, 3\] vs in1 Tile\(fp32, 1, 1\) \[B, 3\]$"):
            Reassemble([self.x, y], self.s, 1, name="join")

    def test_reassemble_input_rank(self):
        with pytest.raises(StepShapeError, match=r"^join: port 'in0' must be a rank-0 stream \(one "
                           r"chunk per tensor\), got rank 1: in0 \[B, 3\] vs in0 \[B, 3\]$"):
            Reassemble([self.x, self.x], self.s, 0, name="join")

    def test_reassemble_selector_width(self):
        with pytest.raises(StepTypeError, match=r"^join: port 'select' needs a stream of "
                           r"Select\(3\), got Select\(2\) of shape \[B\]"):
            Reassemble([self.x] * 3, self.s, 1, name="join")

    def test_reassemble_single_stream(self):
        with pytest.raises(StepTypeError, match=r"^Reassemble: port 'in0' expects a list of "
                           r"streams, got the single stream x \[B, 3\]"):
            Reassemble(self.x, self.s, 1)

    def test_reassemble_count_out_of_range(self):
        with pytest.raises(StepShapeError, match=r"^join: port 'select' needs count in 1\.\.2, "
                           r"got 3 \(input shape \[B\]\)$"):
            Reassemble([self.x, self.x], self.s, 1, count=3, name="join")

    def test_eager_merge_ranks(self):
        with pytest.raises(StepShapeError, match=r"^merge: port 'in1' must be a rank-1 stream \(one "
                           r"chunk per tensor\), got rank 0: in0 \[B, 3\] vs in1 \[B\]$"):
            EagerMerge([self.x, self.p.input("y", [self.B], Index())], 1, name="merge")

    def test_merge_and_reassemble_need_inputs(self):
        with pytest.raises(StepTypeError, match=r"^EagerMerge: port 'in0' expects a stream, got \[\]$"):
            EagerMerge([], 0)
        with pytest.raises(StepShapeError, match=r"^join: port 'in0' needs at least one input "
                           r"stream, got none \(select \[B\]\)$"):
            Reassemble([], self.s, 0, name="join")

    def test_parallelize_static_count_must_divide(self):
        x = self.p.input("st", [3, 2], Index())
        with pytest.raises(StepShapeError) as e:
            Parallelize(x, 2, 1, name="deal")
        assert str(e.value) == ("deal: port 'in0' deals 3 chunks (dimensions [3] above b=1 of "
                                "[3, 2]) over 2 outputs: the count must be a multiple of 2, output "
                                "shape would be [3/2, 2]")

    def test_broadcast_needs_a_consumer(self):
        with pytest.raises(StepShapeError, match=r"^bc: port 'in0' needs n in >= 1, got 0 "
                           r"\(input shape \[B, 3\]\)$"):
            Broadcast(self.x, 0, name="bc")


# -- properties --------------------------------------------------------------------------------

def _tensor(rank):
    if rank == 0:
        return st.integers(0, 99)
    return st.lists(_tensor(rank - 1), max_size=3)


def _mapd(stream, depth, f):
    """Apply ``f`` to every item ``depth`` list levels below the stream list, in stream order."""
    if depth == 0:
        return [f(v) for v in stream]
    return [_mapd(v, depth - 1, f) for v in stream]


@st.composite
def routed(draw):
    """(x nested, rank a, b, n, masks in chunk order, one_hot)"""
    a = draw(st.integers(0, 3))
    b = draw(st.integers(0, a))
    n = draw(st.integers(1, 4))
    x = draw(st.lists(_tensor(a), max_size=3))
    chunks = []
    _mapd(x, a - b, chunks.append)
    one_hot = draw(st.booleans())
    if one_hot:
        masks = [1 << draw(st.integers(0, n - 1)) for _ in chunks]
    else:
        masks = [draw(st.integers(0, (1 << n) - 1)) for _ in chunks]
    return x, a, b, n, masks, one_hot


@settings(deadline=None, max_examples=60)
@given(routed())
def test_partition_then_reassemble_recovers_the_data(case):
    """Reassemble(Partition(x, sel, n, b), sel, b) puts popcount(mask) copies of every level-b
    chunk in a new dimension at level b; for a one-hot selector that is Promote(x, b) exactly and
    Flatten(., b, b + 1) gives x back token for token."""
    x, a, b, n, masks, one_hot = case
    it = iter(masks)
    sel = _mapd(x, a - b, lambda c: next(it))
    it = iter(masks)
    expected = _mapd(x, a - b, lambda c: [c] * bin(next(it)).count("1"))
    expected_parts = [[] for _ in range(n)]
    it = iter(masks)
    _mapd(x, a - b, lambda c: [expected_parts[i].append(c) for m in [next(it)]
                               for i in range(n) if m >> i & 1])

    p = Program("prop")
    shape = [p.symbol(f"d{k}", ragged=True) for k in range(a + 1)]
    xs = p.input("x", shape, Index())
    ss = p.input("s", shape[:a - b + 1], Select(n))
    part = Partition(xs, ss, n, b)
    r = Reassemble(part, ss, b, count=1 if one_hot else None)
    for i in range(n):
        p.output(part[i], f"p{i}")
    p.output(r, "r")
    if one_hot:
        p.output(Flatten(r, b, b + 1), "f")
    res = run(p, inputs={"x": x, "s": sel}, keep_edges=True)

    for i in range(n):
        assert canonical(res.outputs[f"p{i}"], b) == canonical(expected_parts[i], b)
    assert canonical(res.outputs["r"], a + 1) == canonical(expected, a + 1)
    xt = res.edges[xs]
    if one_hot:
        assert res.edges[r.out] == promote(xt, b, a)
        assert res.edges[p.outputs[-1].inputs[0]] == xt
    # the pure functions agree with the interpreter
    parts = partition(xt, res.edges[ss], n, b, rank=a)
    assert parts == [res.edges[o] for o in part.outputs]
    assert reassemble(parts, res.edges[ss], b, select_rank=a - b) == res.edges[r.out]


@st.composite
def merge_inputs(draw):
    b = draw(st.integers(0, 2))
    nested = draw(st.lists(st.lists(_tensor(b), max_size=4), min_size=1, max_size=4))
    return b, [from_nested(tensors, b) for tensors in nested]


@settings(deadline=None, max_examples=60)
@given(merge_inputs(), st.randoms(use_true_random=False))
def test_eager_merge_any_arrival_order_passes_the_checker(case, rnd):
    """Any interleaving of whole chunks passes the checker, which recovers every input."""
    b, ins = case
    counts = [len(list(iter_chunks(t, b, rank=b))) for t in ins]
    order = [j for j, c in enumerate(counts) for _ in range(c)]
    rnd.shuffle(order)
    data, sel = eager_merge(ins, b, order=order)
    rec = check_eager_merge(ins, data, sel, b)
    assert [sum(chunks, []) for chunks in rec] == ins
    rr_data, rr_sel = eager_merge(ins, b)
    check_eager_merge(ins, rr_data, rr_sel, b)
    assert sorted(rr_sel) == sorted(sel)


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 4), st.integers(0, 2), st.lists(_tensor(2), max_size=4))
def test_parallelize_deals_chunks_round_robin(n, b, x):
    """Output j's q-th chunk is chunk q * n + j of the stream."""
    tokens = from_nested(x, 2)
    chunks = [c for c in iter_chunks(tokens, b, rank=2) if c.body is not None]
    outs = parallelize(tokens, n, b, rank=2)
    for j in range(n):
        mine = [c for q, c in enumerate(chunks) if q % n == j]
        want = [t for c in mine for t in (c.body if b == 0 else c.body + [stop(b)])]
        assert outs[j] == want
