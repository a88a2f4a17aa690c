"""The builder of each node's hardware unit (the registry behind :func:`~stepforge.compiler.lower.lower`).

One small function per operator: it reads the node's parameters and the shapes of its streams
and constructs the unit of :mod:`stepforge.hdl` that implements it.
"""

from .lower import LoweringError, Part, builds
from .ops.compute import Accum, AddrGen, Filter, Map, RetileStreamify, Scan
from .ops.memory import Bufferize, Streamify
from .ops.io import Discard, Input, Output
from .ops.offchip import LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad, RandomOffChipStore
from .ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
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


def _streamify_readers(node):
    """The Streamify nodes that replay the buffers of Bufferize ``node``, through Broadcasts."""
    from .ops.routing import Broadcast
    cons = node.program.consumers()
    found, stack = [], [node.outputs[0]]
    while stack:
        s = stack.pop()
        for reader, _ in cons[s]:
            if isinstance(reader, Streamify):
                found.append(reader)
            elif isinstance(reader, Broadcast):
                stack.extend(reader.outputs)
            else:
                raise LoweringError(f"{node.name}: its buffers reach {reader.name} ({reader.op}); "
                                    f"the PMU serves buffers to Streamify nodes (through "
                                    f"Broadcasts) only")
    return sorted(found, key=lambda n: node.program.nodes.index(n))


@builds(Bufferize)
def _bufferize(node, lc):
    from ..hdl.pmu import PMU, Replay
    x = _in(node)
    shape = []
    for d in node.buffer.shape:
        b = lc.program.symbols.bound(d)
        if b is None:
            raise LoweringError(f"{node.name}: buffer dimension {d} has no bound")
        shape.append(max(b, 1))
    static = all(isinstance(d, int) for d in node.buffer.shape)
    readers = _streamify_readers(node)
    replays = [Replay(r.repeat, expand_rank=r.expand_rank,
                      ref_type=None if r.ref is None else r.ref.dtype, order=r.order)
               for r in readers]
    pmu = PMU(x.dtype, x.rank, node.b, tuple(shape), mode="static" if static else "dynamic",
              readers=replays or None, row_bound=lc.row_bound(x.dtype))
    for i, r in enumerate(readers):
        buffers, ref, out = pmu.port_names(i)
        ports = {"buffers": buffers, "out": out}
        if r.ref is not None:
            ports["ref"] = ref
        lc.parts[r] = Part(pmu, ports)
    return Part(pmu, {"in0": "in0", "out": "refs"})


@builds(RetileStreamify)
def _retile(node, lc):
    from ..hdl.retile import RetileStreamifyUnit
    x = _in(node)
    return RetileStreamifyUnit(x.dtype, x.rank, node.split, valid=len(node.inputs) > 1,
                               b=node.b, row_bound=lc.row_bound(x.dtype))


@builds(Filter)
def _filter(node, lc):
    from ..hdl.filter import FilterUnit
    x = _in(node)
    return FilterUnit(x.dtype, x.rank, keep=node.keep, row_bound=lc.row_bound(x.dtype))


@builds(AddrGen)
def _addrgen(node, lc):
    from ..hdl.addrgen import AddrGenUnit
    x, fn = _in(node), node.fn
    return AddrGenUnit(x.dtype, x.rank, fn.shape, fn.strides, scale=fn.scale, offset=fn.offset)


@builds(Partition)
def _partition(node, lc):
    from ..hdl.partition import PartitionUnit
    x = _in(node)
    if not node.drop:
        raise LoweringError(f"{node.name}: Partition(drop=False) has no hardware unit yet")
    return PartitionUnit(x.dtype, x.rank, len(node.outputs), node.b, row_bound=lc.row_bound(x.dtype))


@builds(Reassemble)
def _reassemble(node, lc):
    from ..hdl.reassemble import ReassembleUnit
    x, sel = node.inputs[0], node.inputs[-1]
    return ReassembleUnit(x.dtype, len(node.inputs) - 1, node.b, sel.rank, count=node.count,
                          row_bound=lc.row_bound(x.dtype))


@builds(EagerMerge)
def _eager_merge(node, lc):
    from ..hdl.eager_merge import EagerMergeUnit
    x = _in(node)
    return EagerMergeUnit(x.dtype, len(node.inputs), node.b, row_bound=lc.row_bound(x.dtype))


@builds(Parallelize)
def _parallelize(node, lc):
    from ..hdl.parallelize import ParallelizeUnit
    x = _in(node)
    return ParallelizeUnit(x.dtype, x.rank, len(node.outputs), node.b, row_bound=lc.row_bound(x.dtype))


@builds(Map, Accum, Scan)
def _pcu(node, lc):
    from ..hdl.pcu import PCU
    return PCU.for_node(node, lc.config)
