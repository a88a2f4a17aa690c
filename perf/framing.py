"""The interpreter's run cut to what the model reads: framing, shapes and the values that route.

The model needs the interpreter (:func:`~stepforge.perf.model.needs_run`) only for the beats of
the streams whose framing depends on the data and for the elements it reads (a router's
selector, a PCU's dynamic tile rows: :func:`~stepforge.perf.model.data_streams`). The full run
computes every tile's values and measures every symbolic dimension against its bound; most of
that is not read. :func:`framing_run` walks the program in its order with the interpreter's own
operator semantics (``sim.ref.interpreter.SEMANTICS``, the registry of its public
``semantics``), and

- runs only the nodes some data stream depends on;
- gives a Map, Accum or Scan whose values nothing reads (no selector, flag, valid count or
  address depends on them, through any chain of operators) placeholder tiles (zeros): the
  framing of its output follows from its input's alone (a Map and a Scan keep it, an Accum
  closes a fold on every stop ``>= b``, as ``ops_compute.accum``), so the data streams after it
  get the same beats. A placeholder has the element type's shape when it is static; a Map or
  Scan of symbolic tile rows or columns takes each from the input element of the same symbolic
  dimension (a PCU's dynamic tile rows are read for their shape only); any other node is
  computed, on placeholders where its values are not read;
- does not measure the dimensions (``run(check_bounds=...)``'s ``observe``).

Every stream a data stream depends on has the tokens of the full run in number, stops and
element shapes; a stream whose values are read (a selector, a flag) has the full run's values.
Programs that read an off-chip tensor they also write (values through memory) and programs
with feedback (refused by the model anyway) take the full run. Nor are the bounds checked here:
``predict_program`` (``stepforge run --level perf``, sweeps) keeps the full, checked run.
"""

import numpy as np

from ..compiler.ops.compute import Accum, AddrGen, FlatMap, Filter, Map, RetileStreamify, Scan
from ..compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                    RandomOffChipStore)
from ..compiler.ops.routing import Partition, Reassemble
from ..compiler.types import Tile
from ..contract.tokens import is_stop, stop
from ..sim.ref import interpreter as _interp

__all__ = ["framing_run", "FramingResult", "value_streams"]

#: Node classes whose outputs' framing and element shapes follow from their inputs' framing and
#: shapes, except at the ports named (whose values they read). Any other class reads the values
#: of every input (FlatMap and AddrGen expanders, EagerMerge, Parallelize, ...).
_SHAPE_ONLY = {Partition: ("select",), Reassemble: ("select",), Filter: ("flags",),
               RetileStreamify: ("valid",)}
_PLACEHOLDER = (Map, Accum, Scan)


class FramingResult:
    """What :func:`framing_run` returns: ``edges`` (stream -> tokens) like the interpreter's
    ``Result.edges`` for every stream a data stream depends on; ``full`` tells whether the full
    interpreter ran (the program is outside what the cut run covers)."""

    def __init__(self, edges, full=False):
        self.edges = edges
        self.full = full


def _reads_values(node, port):
    """Whether ``node`` reads the values (not only framing and shapes) of its input ``port``."""
    cls = type(node)
    if cls in _SHAPE_ONLY:
        return port in _SHAPE_ONLY[cls]
    if isinstance(node, (FlatMap, AddrGen, RandomOffChipLoad, RandomOffChipStore)):
        return True
    # the units that move elements as they are (routing, shape, PMU, linear off-chip, compute:
    # a compute node's own values matter only when its outputs' do)
    return False


def value_streams(program, needed):
    """The streams of ``program`` whose element values some read depends on: ``needed`` (the
    model's value ports' streams), the value ports of every node, and, backwards, every input
    of a node one of whose outputs is among them."""
    out = set(needed)
    for node in program.nodes:
        for port, s in zip(node.input_names, node.inputs):
            if _reads_values(node, port):
                out.add(s)
    for node in reversed(program.nodes):
        if any(s in out for s in node.outputs):
            out.update(node.inputs)
    return out


def _ancestors(program, streams):
    """The nodes some stream of ``streams`` depends on (themselves included)."""
    want = set(streams)
    keep = set()
    for node in reversed(program.nodes):
        if any(s in want for s in node.outputs):
            keep.add(node)
            want.update(node.inputs)
    return keep


def _placeholder(dtype):
    """A zero tile of a static :class:`Tile` type, or None."""
    if isinstance(dtype, Tile) and dtype.is_static:
        return np.zeros(dtype.shape, dtype=dtype.dtype.np)
    return None


def _framing(node, ins, ph):
    """The output tokens of a Map, Scan or Accum with ``ph`` for every element."""
    tokens = ins[0]
    if not isinstance(node, Accum):
        return [t if is_stop(t) else ph for t in tokens]
    b = node.b
    out = []
    for t in tokens:
        if is_stop(t) and t.level >= b:
            out.append(ph)
            if t.level > b:
                out.append(stop(t.level - b))
    return out


def _dims_from_inputs(node):
    """For a Map or Scan whose output is a :class:`Tile` of symbolic rows or columns: per output
    dimension, ``(input, axis)`` of an input element with the same symbolic dimension (or the
    int itself); None when some dimension matches none (the node is then computed)."""
    t = node.outputs[0].dtype
    if not isinstance(t, Tile) or isinstance(node, Accum):
        return None
    where = []
    for d in t.shape:
        if isinstance(d, int):
            where.append(d)
            continue
        found = None
        for i, s in enumerate(node.inputs):
            if isinstance(s.dtype, Tile):
                for axis, e in enumerate(s.dtype.shape):
                    if not isinstance(e, int) and e == d:
                        found = (i, axis)
                        break
            if found:
                break
        if found is None:
            return None
        where.append(found)
    return where


def _framing_dynamic(node, ins, where):
    """The output tokens of a Map or Scan of symbolic tile dimensions, each element a zero tile
    of the dimensions its input elements give (:func:`_dims_from_inputs`)."""
    np_type = node.outputs[0].dtype.dtype.np
    cache = {}
    out = []
    for j, t in enumerate(ins[0]):
        if is_stop(t):
            out.append(t)
            continue
        shape = tuple(w if isinstance(w, int) else np.shape(ins[w[0]][j])[w[1]] for w in where)
        ph = cache.get(shape)
        if ph is None:
            ph = cache[shape] = np.zeros(shape, dtype=np_type)
        out.append(ph)
    return out


def framing_run(program, tensors, inputs, data, values):
    """The tokens of the streams ``data`` depends on (module doc).

    Parameters
    ----------
    program : Program
    tensors, inputs : dict
        As for the interpreter's ``run``.
    data : set of Stream
        The streams whose beats the model takes from the run.
    values : set of Stream
        Those of them whose elements the model reads.
    """
    # registers every operator's semantics, as the interpreter's run does
    from ..sim.ref import ops_compute, ops_memory, ops_offchip, ops_routing, ops_shape  # noqa: F401
    stored = {n.tensor for n in program.nodes
              if isinstance(n, (LinearOffChipStore, RandomOffChipStore))}
    loaded = {n.tensor for n in program.nodes
              if isinstance(n, (LinearOffChipLoad, RandomOffChipLoad))}
    if stored & loaded:
        res = _interp.run(program, tensors=tensors, inputs=inputs, keep_edges=True)
        return FramingResult(res.edges, full=True)
    tensors = dict(tensors or {})
    memory = {}
    for name, t in program.tensors.items():
        if t.role in ("input", "inout"):
            if name not in tensors:
                # the interpreter's own error
                return FramingResult(_interp.run(program, tensors=tensors, inputs=inputs,
                                                 keep_edges=True).edges, full=True)
            memory[name] = np.asarray(tensors[name]).astype(t.dtype.np, copy=True)
        else:
            memory[name] = np.zeros(t.shape, dtype=t.dtype.np)
    ctx = _interp.Context(program, memory, dict(inputs or {}))
    run_nodes = _ancestors(program, data)
    # a tile stream the model reads (a PCU's dynamic rows) needs its elements' shapes only
    read = value_streams(program, {s for s in values if not isinstance(s.dtype, Tile)})
    semantics = _interp.SEMANTICS
    edges = {}
    for node in program.nodes:
        if node not in run_nodes:
            continue
        ins = [edges[s] for s in node.inputs]
        ph = where = None
        if isinstance(node, _PLACEHOLDER) and not any(s in read for s in node.outputs):
            ph = _placeholder(node.outputs[0].dtype)
            if ph is None:
                where = _dims_from_inputs(node)
        if ph is not None:
            outs = [_framing(node, ins, ph)]
        elif where is not None:
            outs = [_framing_dynamic(node, ins, where)]
        else:
            fn = semantics.get(type(node))
            if fn is None:
                raise TypeError(f"{node.name}: the interpreter has no semantics for {node.op}")
            outs = fn(node, ins, ctx)
        for s, toks in zip(node.outputs, outs):
            edges[s] = toks
    return FramingResult(edges)
