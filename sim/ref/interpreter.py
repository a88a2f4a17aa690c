"""The reference interpreter: runs a :class:`~stepforge.compiler.Program` on NumPy data.

Every stream is computed in full, node by node in the program's (topological) order, as a token
sequence (:mod:`stepforge.contract.tokens`); its canonical beats are available on request. Each
operator's meaning is a function registered with :func:`semantics` for its node class; the
functions live beside the operator families (``ops_shape``, ``ops_compute``, ``ops_memory``,
``ops_offchip``, ``ops_routing``). After each node runs, every symbolic dimension of its outputs is
measured and checked against its declared bound.
"""

from dataclasses import dataclass, field

import numpy as np

from ...compiler.errors import StepRuntimeError
from ...compiler.graph import Program
from ...contract.tokens import is_stop, to_beats, to_nested

__all__ = ["semantics", "Context", "Result", "run"]

SEMANTICS = {}


def semantics(*node_classes):
    """Register ``fn(node, inputs, ctx) -> list of output token lists`` for ``node_classes``."""
    def register(fn):
        for cls in node_classes:
            SEMANTICS[cls] = fn
        return fn
    return register


class Context:
    """What a running program shares between its operators.

    Attributes
    ----------
    memory : dict of str to numpy.ndarray
        Off-chip tensors by name (outputs are zero-initialised).
    inputs : dict of str to list
        Host-supplied input streams as nested lists.
    offchip_read, offchip_written : dict of str to int
        Bytes each node moved from and to off-chip memory.
    """

    def __init__(self, program, memory, inputs):
        self.program = program
        self.memory = memory
        self.inputs = inputs
        self.offchip_read = {}
        self.offchip_written = {}
        self.next_buffer_id = 0
        self.live_buffers = {}
        self.freed = []

    def read(self, node, nbytes):
        self.offchip_read[node.name] = self.offchip_read.get(node.name, 0) + nbytes

    def write(self, node, nbytes):
        self.offchip_written[node.name] = self.offchip_written.get(node.name, 0) + nbytes


@dataclass
class Result:
    """What :func:`run` returns.

    Attributes
    ----------
    outputs : dict of str to list
        Every program output stream (``Program.output``) as nested lists.
    tensors : dict of str to numpy.ndarray
        Every off-chip tensor after the run.
    edges : dict of Stream to list
        Every stream's tokens (only with ``keep_edges=True``).
    trace : dict of sympy.Symbol to list of int
        The observed values of every symbol that stands alone as a dimension of some stream.
    offchip_read, offchip_written : dict of str to int
        Bytes moved per off-chip node.
    live_buffers : dict
        On-chip buffers still allocated at the end (a leak when non-empty).
    freed : list of int
        Buffer ids in the order they were freed.
    """
    outputs: dict
    tensors: dict
    edges: dict = field(default_factory=dict)
    trace: dict = field(default_factory=dict)
    offchip_read: dict = field(default_factory=dict)
    offchip_written: dict = field(default_factory=dict)
    live_buffers: dict = field(default_factory=dict)
    freed: list = field(default_factory=list)

    def tokens(self, stream):
        return self.edges[stream]

    def beats(self, stream):
        """The canonical beats of ``stream`` (needs ``keep_edges=True``)."""
        return to_beats(self.edges[stream])

    @property
    def offchip_bytes(self):
        return sum(self.offchip_read.values()) + sum(self.offchip_written.values())


def run(program, tensors=None, inputs=None, *, keep_edges=False, check_bounds=True):
    """Run ``program`` and return a :class:`Result`.

    Parameters
    ----------
    program : Program
    tensors : dict of str to array-like
        Contents of every input (and inout) off-chip tensor.
    inputs : dict of str to list
        Every host-supplied input stream as nested lists.
    keep_edges : bool
        Keep every stream's tokens in the result.
    check_bounds : bool
        Raise :class:`StepRuntimeError` when a measured dimension exceeds its symbol's bound.
    """
    # registers every operator's semantics; here, not at the top: each ops_* module imports
    # ``semantics`` from this one (a real cycle)
    from . import ops_compute, ops_memory, ops_offchip, ops_routing, ops_shape  # noqa: F401

    if not isinstance(program, Program):
        raise TypeError(f"run() needs a Program, not {type(program).__name__}")
    tensors = dict(tensors or {})
    inputs = dict(inputs or {})
    memory = {}
    for name, t in program.tensors.items():
        if t.role in ("input", "inout"):
            if name not in tensors:
                raise StepRuntimeError(f"tensor {name!r}: no contents given (tensors={{{name!r}: ...}})", op=name)
            arr = np.asarray(tensors.pop(name))
            if arr.shape != t.shape:
                raise StepRuntimeError(f"tensor {name!r}: expected shape {list(t.shape)}, got {list(arr.shape)}", op=name)
            memory[name] = arr.astype(t.dtype.np, copy=True)
        else:
            memory[name] = np.zeros(t.shape, dtype=t.dtype.np)
    if tensors:
        raise StepRuntimeError(f"unknown tensors given: {sorted(tensors)}")
    ctx = Context(program, memory, inputs)
    values = {}
    trace = {}
    for node in program.nodes:
        fn = SEMANTICS.get(type(node))
        if fn is None:
            raise TypeError(f"{node.name}: the interpreter has no semantics for {node.op}")
        outs = fn(node, [values[s] for s in node.inputs], ctx)
        if len(outs) != len(node.outputs):
            raise AssertionError(f"{node.name}: semantics returned {len(outs)} streams for {len(node.outputs)} outputs")
        for s, toks in zip(node.outputs, outs):
            values[s] = toks
            observe(s, toks, trace, check_bounds)
    outputs = {}
    for node in program.outputs:
        s = node.inputs[0]
        outputs[node.name] = to_nested(values[s], s.rank)
    return Result(outputs=outputs, tensors=memory, edges=values if keep_edges else {},
                  trace=trace, offchip_read=ctx.offchip_read, offchip_written=ctx.offchip_written,
                  live_buffers=ctx.live_buffers, freed=ctx.freed)


def fibre_sizes(tokens, rank):
    """Sizes of every fibre at every level: ``sizes[k]`` lists the lengths of level-``k`` runs.

    ``sizes[rank]`` is ``[number of tensors]``; ``sizes[0]`` counts elements per innermost fibre.
    Level ``k`` is indexed like shapes from the innermost (shape entry ``shape[rank - k]``).
    """
    sizes = [[] for _ in range(rank + 1)]
    count = [0] * (rank + 1)  # count[k]: children of the open level-(k+1) run... see below
    # count[0]: elements in the open innermost fibre; count[k] (k>=1): closed level-k runs in the
    # open level-(k+1) run (k = rank: tensors in the stream).
    for t in tokens:
        if is_stop(t):
            for k in range(t.level):
                sizes[k].append(count[k])
                count[k] = 0
                count[k + 1] += 1
        else:
            count[0] += 1
    if rank == 0:
        return [[count[0]]]
    sizes[rank].append(count[rank])
    return sizes


def observe(stream, tokens, trace, check_bounds=True):
    """Record the measured size of every symbolic dimension of ``stream``; check its bound."""
    symbols = stream.program.symbols
    rank = stream.rank
    card = stream.program.cardinality(stream)
    if not isinstance(card, int) and card.is_Symbol and symbols.info(card).kind == "count":
        trace.setdefault(card, []).append(sum(1 for t in tokens if not is_stop(t)))
    sizes = None
    for i, d in enumerate(stream.shape):
        if isinstance(d, int):
            continue
        if sizes is None:
            sizes = fibre_sizes(tokens, rank)
        observed = sizes[rank - i]
        if d.is_Symbol:
            trace.setdefault(d, []).extend(observed)
        if check_bounds and observed:
            bound = symbols.bound(d)
            worst = max(observed)
            if bound is not None and worst > bound:
                raise StepRuntimeError(
                    f"{stream.node.name}: dimension {d} of {stream.name} is {worst}, over its bound "
                    f"{bound}", op=stream.node.name)
