"""The reference interpreter: runs a :class:`~stepforge.compiler.Program` on NumPy data.

Every stream is computed in full, node by node in the program's (topological) order, as a token
sequence (:mod:`stepforge.contract.tokens`); its canonical beats are available on request. Each
operator's meaning is a function registered with :func:`semantics` for its node class; the
functions live beside the operator families (``ops_shape``, ``ops_compute``, ``ops_memory``,
``ops_offchip``, ``ops_routing``). After each node runs, every symbolic dimension of its outputs is
measured and checked against its declared bound. A program with feedback edges (cycles) is run
to the least fixed point of its cycles by iteration (:func:`_cycles`).
"""

from dataclasses import dataclass, field

import numpy as np

from ...compiler.errors import StepRuntimeError
from ...compiler.graph import Program
from ...compiler.ops.feedback import check_bound, feedbacks
from ...compiler.ops.routing import EagerMerge, Partition
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
    cycle_iterations : int
        Iterations the program's cycles took to reach their fixed point (0: no feedback edge).
    """
    outputs: dict
    tensors: dict
    edges: dict = field(default_factory=dict)
    trace: dict = field(default_factory=dict)
    offchip_read: dict = field(default_factory=dict)
    offchip_written: dict = field(default_factory=dict)
    live_buffers: dict = field(default_factory=dict)
    freed: list = field(default_factory=list)
    cycle_iterations: int = 0

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
    feedback = feedbacks(program)
    check_bound(program)
    if not feedback:
        return _pass(program, memory, inputs, keep_edges, check_bounds)
    return _cycles(program, memory, inputs, feedback, keep_edges, check_bounds)


def _pass(program, memory, inputs, keep_edges, check_bounds, guess=None, lenient=(),
          orders=None):
    """Run every node once in the program's order. ``guess`` gives the tokens of each feedback
    stream (its input is computed later in the order); the Partitions in ``lenient`` take their
    data and selector only as far as both go, and the EagerMerges in ``orders`` keep the order
    of the previous iteration and append the chunks that are new (an iteration of
    :func:`_cycles`; ``orders`` is updated in place)."""
    memory = {k: v.copy() for k, v in memory.items()}
    ctx = Context(program, memory, inputs)
    values = {}
    trace = {}
    for node in program.nodes:
        if guess is not None and node in guess:
            outs = [list(guess[node])]
        else:
            fn = SEMANTICS.get(type(node))
            if fn is None:
                raise TypeError(f"{node.name}: the interpreter has no semantics for {node.op}")
            ins = [values[s] for s in node.inputs]
            if node in lenient:
                ins = _as_far_as_both(node, ins)
            if orders is not None and node in orders:
                outs = _merge_after(node, ins, orders)
            else:
                outs = fn(node, ins, ctx)
        if len(outs) != len(node.outputs):
            raise AssertionError(f"{node.name}: semantics returned {len(outs)} streams for {len(node.outputs)} outputs")
        for s, toks in zip(node.outputs, outs):
            values[s] = toks
            observe(s, toks, trace, check_bounds)
    outputs = {}
    for node in program.outputs:
        s = node.inputs[0]
        outputs[node.name] = to_nested(values[s], s.rank)
    res = Result(outputs=outputs, tensors=memory, edges=values if keep_edges else {},
                 trace=trace, offchip_read=ctx.offchip_read, offchip_written=ctx.offchip_written,
                 live_buffers=ctx.live_buffers, freed=ctx.freed)
    res._values = values
    return res


def _cycles(program, memory, inputs, feedback, keep_edges, check_bounds):
    """Run a program with feedback edges: the least fixed point of its cycles (Kahn's
    semantics), found by iteration, then one strict pass (``docs/routing.md``, "Cycles").

    Every feedback stream starts empty. Each iteration runs the whole program with the feedback
    streams of the previous one; a Partition downstream of a feedback forwards only the chunks
    its selector has reached (and uses only the selector elements that have a chunk), as the
    hardware would when the rest has not arrived, and an EagerMerge downstream of a feedback
    keeps the order it merged in earlier iterations and appends what is new (round-robin):
    a chunk that exists only from a later iteration arrived later. The feedback streams grow each iteration
    (each must extend the previous one: a cycle that changes what it already produced does not
    converge) until an iteration adds nothing; the program then runs once more without the
    truncation, so a cycle that stops short of its data (a deadlock in hardware) is the
    Partition's run-time error, prefixed by the cycle's state.
    """
    late = set()
    cons = program.consumers()
    stack = [f.outputs[0] for f in feedback]
    while stack:
        for n, _ in cons[stack.pop()]:
            if n not in late:
                late.add(n)
                stack.extend(n.outputs)
    lenient = {n for n in late if isinstance(n, Partition)}
    orders = {n: [] for n in late if isinstance(n, EagerMerge)}
    limit = 2
    for f in feedback:
        bound = program.symbols.bound(program.cardinality(f.outputs[0]))
        limit += bound if bound is not None else 1 << 16
    guess = {f: [] for f in feedback}
    for it in range(limit):
        res = _pass(program, memory, inputs, False, False, guess, lenient, orders)
        new = {f: res._values[f.inputs[0]] for f in feedback}
        for f in feedback:
            old = guess[f]
            if new[f][:len(old)] != old:
                k = next(k for k, (a, b) in enumerate(zip(new[f], old)) if a != b) \
                    if any(a != b for a, b in zip(new[f], old)) else len(new[f])
                raise StepRuntimeError(
                    f"{f.name}: the cycle does not converge: iteration {it + 1} changed token {k} "
                    f"of the feedback ({len(old)} tokens before, {len(new[f])} now); a cycle must "
                    f"only extend what it has produced", op=f.name, port="in0")
        if new == guess:
            break
        guess = new
    else:
        raise StepRuntimeError(f"{feedback[0].name}: the cycle did not reach a fixed point in "
                               f"{limit} iterations", op=feedback[0].name, port="in0")
    try:
        res = _pass(program, memory, inputs, keep_edges, check_bounds, guess, (), orders)
    except StepRuntimeError as e:
        state = "; ".join(f"{f.name} carries {sum(1 for t in guess[f] if not is_stop(t))} "
                          f"elements" for f in feedback)
        raise StepRuntimeError(f"the cycle reached its fixed point after {it + 1} iterations "
                               f"({state}), short of what the program needs (in hardware: a "
                               f"deadlock): {e}", op=e.op, port=e.port, beat=e.beat) from None
    for f in feedback:
        _check_declared(f, guess[f])
    res.cycle_iterations = it + 1
    return res


def _merge_after(node, ins, orders):
    """An EagerMerge inside a cycle: the chunks it merged in earlier iterations first, in their
    order, then the new ones round-robin (a chunk that appears in a later iteration arrives
    later). Updates ``orders[node]``."""
    from .ops_routing import eager_merge, iter_chunks  # not at the top: it imports this module
    counts = [sum(1 for _ in iter_chunks(s, node.b, rank=node.b, op=node.name, port=f"in{j}"))
              for j, s in enumerate(ins)]
    order = list(orders[node])
    left = list(counts)
    for j in order:
        left[j] -= 1
    if any(x < 0 for x in left):
        j = next(j for j, x in enumerate(left) if x < 0)
        raise StepRuntimeError(f"{node.name}: in{j} has {counts[j]} chunks, fewer than an "
                               f"earlier iteration of the cycle merged", op=node.name,
                               port=f"in{j}")
    while any(left):
        for j in range(len(left)):
            if left[j]:
                order.append(j)
                left[j] -= 1
    orders[node] = order
    return list(eager_merge(ins, node.b, op=node.name, order=order))


def _as_far_as_both(node, ins):
    """A Partition's data and selector cut to the chunks both have: the first ``k`` selector
    elements, with the stops that follow the ``k``-th (they close fibres the data's ``k``-th
    chunk closes too), and the data up to the end of its ``k``-th chunk. A chunk the stream has
    not finished yet (no closing stop) does not count."""
    from .ops_routing import iter_chunks  # not at the top: it imports this module
    data, sel = ins
    chunks = []
    try:
        for c in iter_chunks(data, node.b, rank=node.inputs[0].rank, op=node.name):
            chunks.append(c)
    except StepRuntimeError:
        pass                    # an unfinished chunk at the end of a truncated stream
    if node.inputs[1].rank == 0:
        k = min(len(chunks), len(sel))
        return [data[:chunks[k - 1].last + 1] if k else [], sel[:k]]
    elements = [i for i, t in enumerate(sel) if not is_stop(t)]
    k = min(len(chunks), len(elements))
    if not k:
        return [[], []]
    end = elements[k - 1] + 1
    while end < len(sel) and is_stop(sel[end]):
        end += 1
    return [data[:chunks[k - 1].last + 1], sel[:end]]


def _check_declared(f, tokens):
    """The feedback's tokens have the declared static sizes (the bound stream may be symbolic)."""
    out = f.outputs[0]
    sizes = fibre_sizes(tokens, out.rank)
    for i, d in enumerate(out.shape):
        if isinstance(d, int):
            bad = [x for x in sizes[out.rank - i] if x != d]
            if bad:
                raise StepRuntimeError(
                    f"{f.name}: the feedback is declared as {list(out.shape)}, but the stream "
                    f"bound to it ({f.inputs[0].name}) has {bad[0]} at dimension {i}",
                    op=f.name, port="in0")


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
