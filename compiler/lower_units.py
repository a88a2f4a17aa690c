"""The builder of each node's hardware unit (the registry behind :func:`~stepforge.compiler.lower.lower`).

One small function per operator: it reads the node's parameters and the shapes of its streams
and constructs the unit of :mod:`stepforge.hdl` that implements it.
"""

from .lower import builds
from .ops.io import Discard, Input, Output
from .ops.offchip import LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad, RandomOffChipStore
from .ops.routing import Broadcast
from .ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip


def _in(node, i=0):
    return node.inputs[i]


@builds(Input)
def _input(node, lc):
    from ..hdl.beat_io import BeatReader
    return BeatReader(lc.layout(node.outputs[0]), lc.geometry, lc.stream_base[node.name])


@builds(Output)
def _output(node, lc):
    from ..hdl.beat_io import BeatWriter
    s = node.inputs[0]
    info_beats = 2 * lc.program.symbols.bound(lc.program.cardinality(s)) + 2
    return BeatWriter(lc.layout(s), lc.geometry, lc.stream_base[node.name], info_beats)


@builds(Discard)
def _discard(node, lc):
    from ..hdl.beat_io import DiscardUnit
    return DiscardUnit(lc.layout(node.inputs[0]))


@builds(Flatten)
def _flatten(node, lc):
    from ..hdl.flatten import FlattenUnit
    x = _in(node)
    return FlattenUnit(x.dtype, x.rank, node.lo, node.hi, row_bound=lc.row_bound(x.dtype))


@builds(Reshape)
def _reshape(node, lc):
    from ..hdl.reshape import ReshapeUnit
    x = _in(node)
    return ReshapeUnit(x.dtype, x.rank, node.chunk, node.b, pad=node.pad, flags=node.flags,
                       row_bound=lc.row_bound(x.dtype))


@builds(Promote)
def _promote(node, lc):
    from ..hdl.promote import PromoteUnit
    x = _in(node)
    return PromoteUnit(x.dtype, x.rank, node.b, row_bound=lc.row_bound(x.dtype))


@builds(Expand)
def _expand(node, lc):
    from ..hdl.expand import ExpandUnit
    x, r = node.inputs
    bounds = {**(lc.row_bound(x.dtype) or {}), **(lc.row_bound(r.dtype) or {})} or None
    return ExpandUnit(x.dtype, r.dtype, x.rank, node.b, row_bound=bounds)


@builds(RepeatStatic)
def _repeat(node, lc):
    from ..hdl.repeat import RepeatStaticUnit
    x = _in(node)
    return RepeatStaticUnit(x.dtype, x.rank, node.n, row_bound=lc.row_bound(x.dtype))


@builds(Zip)
def _zip(node, lc):
    from ..hdl.zip import ZipUnit
    x = _in(node)
    bounds = {}
    for s in node.inputs:
        bounds.update(lc.row_bound(s.dtype) or {})
    return ZipUnit([s.dtype for s in node.inputs], x.rank, row_bound=bounds or None)


@builds(Broadcast)
def _broadcast(node, lc):
    from ..hdl.broadcast import BroadcastUnit
    x = _in(node)
    return BroadcastUnit(x.dtype, x.rank, len(node.outputs), depth=2, row_bound=lc.row_bound(x.dtype))


@builds(LinearOffChipLoad)
def _linear_load(node, lc):
    from ..hdl.offchip_load import LinearLoadUnit
    ref = node.inputs[0] if node.inputs else None
    return LinearLoadUnit(lc.placement(node.tensor, node.tile), node.out_shape, node.stride,
                          offset=node.offset,
                          ref_type=None if ref is None else ref.dtype,
                          ref_rank=None if ref is None else ref.rank,
                          row_bound=None if ref is None else lc.row_bound(ref.dtype))


@builds(LinearOffChipStore)
def _linear_store(node, lc):
    from ..hdl.offchip_store import LinearStoreUnit
    x = _in(node)
    return LinearStoreUnit(lc.placement(node.tensor, (x.dtype.rows, x.dtype.cols)), x.rank)


@builds(RandomOffChipLoad)
def _random_load(node, lc):
    from ..hdl.offchip_load import RandomLoadUnit
    a = _in(node)
    return RandomLoadUnit(lc.placement(node.tensor, node.tile), a.rank)


@builds(RandomOffChipStore)
def _random_store(node, lc):
    from ..hdl.offchip_store import RandomStoreUnit
    a, d = node.inputs
    return RandomStoreUnit(lc.placement(node.tensor, (d.dtype.rows, d.dtype.cols)), a.rank, d.rank)
