"""Malformed programs of the shape family and the graph core: exact error type and operator named.

Each family's malformed programs live beside it; ``tests/test_errors.py`` gathers the
cross-family ones.
"""

import pytest

from stepforge.compiler.errors import StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip
from stepforge.compiler.types import Index, Tile, int8


def prog():
    p = Program("bad")
    B = p.symbol("B", bound=16)
    return p, p.input("x", [2, B, 4], Tile(int8, 1, 1)), p.input("y", [2, 3], Index())


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
