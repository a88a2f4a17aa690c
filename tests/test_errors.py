"""Malformed programs: each raises the exact error type, naming the operator and the port.

Every family of operators is represented (shape, off-chip, on-chip, compute, routing) as well as
the graph core; each family's own test file holds more.
"""

import pytest

from stepforge.compiler.errors import StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip
from stepforge.compiler.types import Index, Select, Tile, fp32, int8, int32
from stepforge import (Accum, Bufferize, EagerMerge, LinearOffChipLoad, LinearOffChipStore, Map,
                       Parallelize, Partition, RandomOffChipLoad, RandomOffChipStore, Reassemble,
                       RetileStreamify, Scan, Streamify, exp, matmul, retile_row)


def prog():
    p = Program("bad")
    B = p.symbol("B", bound=16)
    return p, p.input("x", [2, B, 4], Tile(int8, 1, 1)), p.input("y", [2, 3], Index())


def tensors(p):
    A = p.tensor("A", (8, 8), int8)
    O = p.tensor("O", (8, 8), int8, role="output")
    return A, O




CASES = [
    ("flatten hi above rank", StepShapeError, "Flatten_0: port 'in0'", lambda x, y: Flatten(x, 0, 3)),
    ("flatten lo == hi", StepShapeError, "Flatten_0: port 'in0' needs hi in 1..2", lambda x, y: Flatten(x, 0, 0)),
    ("flatten negative lo", StepShapeError, "Flatten_0: port 'in0' needs lo", lambda x, y: Flatten(x, -1, 1)),
    ("reshape chunk 0", StepShapeError, "Reshape_0: port 'in0' needs chunk", lambda x, y: Reshape(x, 0, 0)),
    ("reshape dynamic b>0", StepShapeError, "Reshape_0: port 'in0' splits dimension 1", lambda x, y: Reshape(x, 2, 1)),
    ("reshape no pad", StepShapeError, "Reshape_0: port 'in0' splits dimension 0 of shape [2, 3]", lambda x, y: Reshape(y, 2, 0)),
    ("reshape b above rank", StepShapeError, "Reshape_0: port 'in0' needs b in 0..2", lambda x, y: Reshape(x, 2, 3, pad=0)),
    ("promote b too large", StepShapeError, "Promote_0: port 'in0' needs b in 0..3", lambda x, y: Promote(x, 4)),
    ("repeat n = 0", StepShapeError, "RepeatStatic_0: port 'in0' needs n", lambda x, y: RepeatStatic(x, 0)),
    ("expand rank mismatch", StepShapeError, "Expand_0: port 'ref' must have the rank of the data: data [2, 3] vs ref [2, B, 4]",
     lambda x, y: Expand(y, x, 1)),
    ("expand trailing not 1", StepShapeError, "Expand_0: port 'in0' needs its 1 innermost dimensions to be 1",
     lambda x, y: Expand(x, x, 1)),
    ("zip shape mismatch", StepShapeError, "Zip_0: port 'in1' must have the shape of in0: [2, B, 4] vs [2, 3]",
     lambda x, y: Zip(x, y)),
    ("zip one stream", StepShapeError, "Zip_0: port 'in0' needs at least two streams", lambda x, y: Zip(x)),
    ("not a stream", StepTypeError, "Flatten: port 'in0' expects a stream", lambda x, y: Flatten([1, 2], 0, 1)),
    # off-chip memory
    ("load tile does not divide", StepShapeError, "LinearOffChipLoad_0: port 'tensor' tile [3, 4] does not divide",
     lambda x, y: LinearOffChipLoad(tensors(x.program)[0], (3, 4), out_shape=(2,), stride=(1,))),
    ("load walks outside", StepShapeError, "LinearOffChipLoad_0: port 'tensor' reads tile 4, outside tensor A",
     lambda x, y: LinearOffChipLoad(tensors(x.program)[0], (4, 4), out_shape=(5,), stride=(1,))),
    ("load stride count", StepShapeError, "LinearOffChipLoad_0: port 'out' needs one int stride per out_shape",
     lambda x, y: LinearOffChipLoad(tensors(x.program)[0], (4, 4), out_shape=(2, 2), stride=(1,))),
    ("load from an output", StepTypeError, "LinearOffChipLoad_0: port 'tensor'",
     lambda x, y: LinearOffChipLoad(tensors(x.program)[1], (4, 4), out_shape=(2,), stride=(1,))),
    ("store too many tiles", StepShapeError, "LinearOffChipStore_0: port 'in0' stream [1, 2, 2, 2] holds 8 tiles",
     lambda x, y: LinearOffChipStore(LinearOffChipLoad(tensors(x.program)[0], (4, 4), out_shape=(2, 2, 2),
                                                       stride=(0, 2, 1)), x.program.tensors["O"])),
    ("store wrong dtype", StepTypeError, "LinearOffChipStore_0: port 'in0' writes Tile(int32, 4, 4)",
     lambda x, y: LinearOffChipStore(Map(lambda a: a, x.program.input("t", [1, 4], Tile(int32, 4, 4))),
                                     x.program.tensor("Q", (8, 8), int8, role="output"))),
    ("random load addr type", StepTypeError, "RandomOffChipLoad_0: port 'addr' expects a stream of Index",
     lambda x, y: RandomOffChipLoad(x, tensors(x.program)[0], (4, 4))),
    ("random store addr type", StepTypeError, "RandomOffChipStore_0: port 'addr' expects a stream of Index",
     lambda x, y: RandomOffChipStore(x, x, tensors(x.program)[1])),
    # on-chip memory
    ("bufferize b = 0", StepShapeError, "Bufferize_0: port 'in0' needs b in 1..2", lambda x, y: Bufferize(x, 0)),
    ("streamify non-buffer", StepTypeError, "Streamify_0: port 'buffers' expects a stream of Buffer",
     lambda x, y: Streamify(x, repeat=2)),
    ("streamify repeat 0", StepShapeError, "Streamify_0: port 'buffers' needs repeat >= 1",
     lambda x, y: Streamify(Bufferize(x, 1), repeat=0)),
    ("streamify repeat and ref", StepShapeError, "Streamify_0: port 'ref' takes either repeat or ref",
     lambda x, y: Streamify(Bufferize(x, 1), repeat=2, ref=y, expand_rank=1)),
    ("streamify affine order on dynamic buffer", StepShapeError, "Streamify_0: port 'buffers' needs a static buffer shape",
     lambda x, y: Streamify(Bufferize(x, 2), order=((4, 4), (1, 4)))),
    # compute
    ("map shape mismatch", StepShapeError, "Map_0: port 'in1'", lambda x, y: Map(lambda a, b: a + b, x, y)),
    ("map not a function", StepTypeError, "Map_0: port 'in0' needs a tile function", lambda x, y: Map(42, x)),
    ("map on indices", StepTypeError, "Map_0", lambda x, y: Map(exp, y)),
    ("matmul inner mismatch", StepShapeError, "Map_0: port 'in1' fn matmul: a @ b needs a's columns to equal b's rows",
     lambda x, y: Map(matmul, x.program.input("a", [1, 2], Tile(fp32, 4, 3)), x.program.input("w", [1, 2], Tile(fp32, 4, 3)))),
    ("accum b above rank", StepShapeError, "Accum_0: port 'in0' needs b in 1..2",
     lambda x, y: Accum(lambda acc, v: acc + v, Tile(int8, 1, 1), x, b=3)),
    ("accum init type", StepTypeError, "Accum_0",
     lambda x, y: Accum(lambda acc, v: acc + v, Tile(int32, 1, 1), x, b=1)),
    ("scan b = 0", StepShapeError, "Scan_0: port 'in0' needs b", lambda x, y: Scan(lambda acc, v: acc + v, Tile(int8, 1, 1), x, b=0)),
    ("retile on indices", StepTypeError, "RetileStreamify_0", lambda x, y: RetileStreamify(y, "row")),
    ("retile_row init on Index", StepTypeError, "Accum_0", lambda x, y: Accum(retile_row, None, y, b=1)),
    # routing
    ("partition selector type", StepTypeError, "Partition_0: port 'select' needs a stream of Select(2)",
     lambda x, y: Partition(x, y, 2, 1)),
    ("partition selector shape", StepShapeError, "Partition_0: port 'select' must have the data's dimensions above",
     lambda x, y: Partition(x, x.program.input("s", [3], Select(2)), 2, 2)),
    ("reassemble inner dims", StepShapeError, "Reassemble_0: port 'in1'",
     lambda x, y: Reassemble([x.program.input("a", [5, 4], Index()), x.program.input("b", [5, 3], Index())],
                             x.program.input("s", [2], Select(2)), 1)),
    ("eager merge element types", StepTypeError, "EagerMerge_0: port 'in1'",
     lambda x, y: EagerMerge([x.program.input("a", [5, 4], Index()), x.program.input("b", [5, 4], Tile(int8, 1, 1))], 1)),
    ("parallelize indivisible", StepShapeError, "Parallelize_0: port 'in0' deals 2 chunks",
     lambda x, y: Parallelize(y, 3, 1)),
]


@pytest.mark.parametrize("what,error,message,build", CASES, ids=[c[0] for c in CASES])
def test_malformed(what, error, message, build):
    p, x, y = prog()
    with pytest.raises(error) as info:
        build(x, y)
    assert message in str(info.value)
    assert str(info.value).split(":")[0] == info.value.op


def test_failed_node_is_not_added():
    p, x, y = prog()
    with pytest.raises(StepShapeError):
        Flatten(x, 0, 7)
    assert [n.op for n in p.nodes] == ["Input", "Input"]


def test_stream_of_another_program():
    p, x, y = prog()
    q, x2, y2 = prog()
    with pytest.raises(StepShapeError, match="Zip_0: port 'in1' is a stream of another program"):
        Zip(y, y2)


def test_multi_output_node_needs_an_index():
    p, x, y = prog()
    r = Reshape(y, 3, 0, flags=True)
    with pytest.raises(StepTypeError, match=r"Flatten_0: port 'in0' expects a stream, got node Reshape_0 with 2 outputs"):
        Flatten(r, 0, 1)


def test_tensor_declarations():
    p = Program("bad")
    with pytest.raises(StepShapeError, match="tensor 'T': shape must be two positive ints"):
        p.tensor("T", (4,), int8)
    with pytest.raises(StepTypeError, match="tensor 'T': dtype must be a DType"):
        p.tensor("T", (4, 4), "int8")
    with pytest.raises(ValueError, match="symbol 'B' is already declared as dynamic with bound 4"):
        p.symbol("B", bound=4)
        p.symbol("B", bound=5)
