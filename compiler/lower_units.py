"""The builder of each node's hardware unit (the registry behind :func:`~stepforge.compiler.lower.lower`).

One small function per operator: it reads the node's parameters and the shapes of its streams
and constructs the unit of :mod:`stepforge.hdl` that implements it.
"""

from ..hdl.addrgen import AddrGenUnit
from ..hdl.beat_io import BeatReader, BeatWriter, DiscardUnit
from ..hdl.broadcast import BroadcastUnit
from ..hdl.eager_merge import EagerMergeUnit
from ..hdl.expand import ExpandUnit
from ..hdl.feedback import FeedbackUnit
from ..hdl.filter import FilterUnit
from ..hdl.flatten import FlattenUnit
from ..hdl.offchip_load import LinearLoadUnit, RandomLoadUnit
from ..hdl.offchip_store import LinearStoreUnit, RandomStoreUnit
from ..hdl.parallelize import ParallelizeUnit
from ..hdl.partition import PartitionUnit
from ..hdl.pcu import PCU
from ..hdl.pmu import PMU, Replay
from ..hdl.promote import PromoteUnit
from ..hdl.reassemble import ReassembleUnit
from ..hdl.repeat import RepeatStaticUnit
from ..hdl.reshape import ReshapeUnit
from ..hdl.retile import RetileStreamifyUnit
from ..hdl.zip import ZipUnit
from .lower import LoweringError, Part, builds
from .ops.feedback import Feedback
from .ops.compute import Accum, AddrGen, Filter, Map, RetileStreamify, Scan
from .ops.io import Discard, Input, Output
from .ops.memory import Bufferize, Streamify
from .ops.offchip import LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad, RandomOffChipStore
from .ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from .ops.shape import Expand, Flatten, Promote, RepeatStatic, Reshape, Zip
from .types import Tile, Tuple


def _in(node, i=0):
    return node.inputs[i]


@builds(Input)
def _input(node, lc):
    s = node.outputs[0]
    # the room lower() reserves for the stream: the reader's speculative reads stay inside it
    max_beats = 2 * lc.program.symbols.bound(lc.program.cardinality(s)) + 2
    return BeatReader(lc.layout(s), lc.geometry, lc.stream_base[node.name], max_beats)


@builds(Output)
def _output(node, lc):
    s = node.inputs[0]
    info_beats = 2 * lc.program.symbols.bound(lc.program.cardinality(s)) + 2
    return BeatWriter(lc.layout(s), lc.geometry, lc.stream_base[node.name], info_beats)


@builds(Discard)
def _discard(node, lc):
    return DiscardUnit(lc.layout(node.inputs[0]))


@builds(Feedback)
def _feedback(node, lc):
    x = node.outputs[0]
    count = x.shape[0] if x.rank == 0 and isinstance(x.shape[0], int) else None
    return FeedbackUnit(x.dtype, x.rank, row_bound=lc.row_bound(x.dtype), count=count)


@builds(Flatten)
def _flatten(node, lc):
    x = _in(node)
    return FlattenUnit(x.dtype, x.rank, node.lo, node.hi, row_bound=lc.row_bound(x.dtype))


@builds(Reshape)
def _reshape(node, lc):
    x = _in(node)
    return ReshapeUnit(x.dtype, x.rank, node.chunk, node.b, pad=node.pad, flags=node.flags,
                       row_bound=lc.row_bound(x.dtype))


@builds(Promote)
def _promote(node, lc):
    x = _in(node)
    return PromoteUnit(x.dtype, x.rank, node.b, row_bound=lc.row_bound(x.dtype))


@builds(Expand)
def _expand(node, lc):
    x, r = node.inputs
    bounds = {**(lc.row_bound(x.dtype) or {}), **(lc.row_bound(r.dtype) or {})} or None
    return ExpandUnit(x.dtype, r.dtype, x.rank, node.b, row_bound=bounds)


@builds(RepeatStatic)
def _repeat(node, lc):
    x = _in(node)
    return RepeatStaticUnit(x.dtype, x.rank, node.n, row_bound=lc.row_bound(x.dtype))


@builds(Zip)
def _zip(node, lc):
    x = _in(node)
    bounds = {}
    for s in node.inputs:
        bounds.update(lc.row_bound(s.dtype) or {})
    return ZipUnit([s.dtype for s in node.inputs], x.rank, row_bound=bounds or None)


@builds(Broadcast)
def _broadcast(node, lc):
    x = _in(node)
    return BroadcastUnit(x.dtype, x.rank, len(node.outputs), depth=2, row_bound=lc.row_bound(x.dtype))


@builds(LinearOffChipLoad)
def _linear_load(node, lc):
    ref = node.inputs[0] if node.inputs else None
    return LinearLoadUnit(lc.placement(node.tensor, node.tile), node.out_shape, node.stride,
                          offset=node.offset,
                          ref_type=None if ref is None else ref.dtype,
                          ref_rank=None if ref is None else ref.rank,
                          row_bound=None if ref is None else lc.row_bound(ref.dtype))


@builds(LinearOffChipStore)
def _linear_store(node, lc):
    """A store of an Accum's results, at least a tile's lines + 2 beats apart, holds one tile
    (the writer's second tile register would never fill)."""
    x = _in(node)
    placement = lc.placement(node.tensor, (x.dtype.rows, x.dtype.cols))
    fold = getattr(x.node, "fold_size", None)
    queue = 1 if fold is not None and fold >= len(placement.tile_lines) + 2 else 2
    return LinearStoreUnit(placement, x.rank, tile_queue=queue)


@builds(RandomOffChipLoad)
def _random_load(node, lc):
    a = _in(node)
    return RandomLoadUnit(lc.placement(node.tensor, node.tile), a.rank)


@builds(RandomOffChipStore)
def _random_store(node, lc):
    a, d = node.inputs
    return RandomStoreUnit(lc.placement(node.tensor, (d.dtype.rows, d.dtype.cols)), a.rank, d.rank)


def _streamify_readers(node):
    """The Streamify nodes that replay the buffers of Bufferize ``node``, through Broadcasts."""
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
    # one mapping serves every port of the PMU: the buffered element's dynamic tiles and those of
    # each reference stream (a Streamify replaying once per element of a stream of ragged tiles)
    row_bound = {}
    for t in [x.dtype] + [r.ref.dtype for r in readers if r.ref is not None]:
        row_bound.update(lc.row_bound(t) or {})
    pmu = PMU(x.dtype, x.rank, node.b, tuple(shape), mode="static" if static else "dynamic",
              readers=replays or None, row_bound=row_bound or None)
    for i, r in enumerate(readers):
        buffers, ref, out = pmu.port_names(i)
        ports = {"buffers": buffers, "out": out}
        if r.ref is not None:
            ports["ref"] = ref
        lc.parts[r] = Part(pmu, ports)
    return Part(pmu, {"in0": "in0", "out": "refs"})


@builds(RetileStreamify)
def _retile(node, lc):
    x = _in(node)
    return RetileStreamifyUnit(x.dtype, x.rank, node.split, valid=len(node.inputs) > 1,
                               b=node.b, row_bound=lc.row_bound(x.dtype))


@builds(Filter)
def _filter(node, lc):
    x = _in(node)
    return FilterUnit(x.dtype, x.rank, keep=node.keep, row_bound=lc.row_bound(x.dtype))


@builds(AddrGen)
def _addrgen(node, lc):
    x, fn = _in(node), node.fn
    return AddrGenUnit(x.dtype, x.rank, fn.shape, fn.strides, scale=fn.scale, offset=fn.offset,
                       counted=fn.counted)


@builds(Partition)
def _partition(node, lc):
    x = _in(node)
    if not node.drop:
        raise LoweringError(f"{node.name}: Partition(drop=False) has no hardware unit yet")
    return PartitionUnit(x.dtype, x.rank, len(node.outputs), node.b, row_bound=lc.row_bound(x.dtype))


@builds(Reassemble)
def _reassemble(node, lc):
    x, sel = node.inputs[0], node.inputs[-1]
    return ReassembleUnit(x.dtype, len(node.inputs) - 1, node.b, sel.rank, count=node.count,
                          row_bound=lc.row_bound(x.dtype))


@builds(EagerMerge)
def _eager_merge(node, lc):
    """One unit for every input: dynamic tiles of different row symbols merge when their bounds
    are equal (their beats are then of one width); different bounds are refused."""
    x = _in(node)
    bounds = [sorted((lc.row_bound(s.dtype) or {}).values()) for s in node.inputs]
    if any(b != bounds[0] for b in bounds[1:]):
        shown = ", ".join(f"{name} {s.dtype!r} (rows <= {b[0] if b else '-'})"
                          for name, s, b in zip(node.input_names, node.inputs, bounds))
        raise LoweringError(f"{node.name}: merging dynamic tiles of different row bounds is not "
                            f"built in hardware (their beats differ in width): {shown}; "
                            f"declare one bound for every input's row count")
    return EagerMergeUnit(x.dtype, len(node.inputs), node.b, row_bound=lc.row_bound(x.dtype))


@builds(Parallelize)
def _parallelize(node, lc):
    x = _in(node)
    return ParallelizeUnit(x.dtype, x.rank, len(node.outputs), node.b, row_bound=lc.row_bound(x.dtype))


def pcu_for_node(node, config, *, row_bound=None):
    """The PCU of a Map, Accum or Scan graph node on the machine ``config``.

    Parameters
    ----------
    node : Map, Accum or Scan
    config : stepforge.hdl.config.HardwareConfig
        Supplies ``pcu_lanes``, ``pcu_multipliers`` and ``family``.
    row_bound : int or Mapping, optional
        Default: the program's bounds of the symbols of every dynamic row count.
    """
    if row_bound is None:
        row_bound = {}
        sym = node.program.symbols
        for s in list(node.inputs) + list(node.outputs):
            for t in (s.dtype.elems if isinstance(s.dtype, Tuple) else (s.dtype,)):
                if isinstance(t, Tile) and not isinstance(t.rows, int):
                    row_bound[t.rows] = sym.bound(t.rows)
    types = [s.dtype for s in node.inputs]
    rank = node.inputs[0].rank
    kw = dict(lanes=config.pcu_lanes, multipliers=config.pcu_multipliers,
              family=config.family, row_bound=row_bound,
              src_loc_at=1)  # an unused unit is reported at the caller
    if isinstance(node, Map):
        return PCU(node.fn, types, rank, **kw)
    if isinstance(node, (Accum, Scan)):
        mode = "accum" if isinstance(node, Accum) else "scan"
        out = node.outputs[0].dtype if node.fn.accum is not None else None
        if mode == "accum":
            kw["emit_spacing"] = max(node.fold_size or 1, 1)
            kw["fold_bound"] = node.fold_size
        return PCU(node.fn, types, rank, mode=mode, init=node.init, b=node.b, out_type=out, **kw)
    raise TypeError(f"a PCU implements Map, Accum and Scan nodes, not {node!r}")


@builds(Map, Accum, Scan)
def _pcu(node, lc):
    return pcu_for_node(node, lc.config)
