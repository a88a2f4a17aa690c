"""Meaning of Bufferize and Streamify on token sequences, and buffer lifetimes (spec section 4).

The pure functions :func:`bufferize` and :func:`streamify` work on token lists alone (the hardware
unit tests use them as golden models); the registrations add the bookkeeping of a running program:

* every buffer Bufferize closes gets a fresh id from ``ctx.next_buffer_id`` and an entry
  ``ctx.live_buffers[id]`` (a :class:`LiveBuffer`) whose ``pending`` set names the Streamify nodes
  that can receive its reference (the reference count);
* a Streamify removes itself from ``pending`` after its last replay of the buffer (and, when it
  has run to the end, from every buffer it never received); the buffer is freed when ``pending``
  is empty: its entry leaves ``ctx.live_buffers`` and its id is appended to ``ctx.freed``, so
  ``ctx.freed`` is the order in which buffers were freed.

A buffer's contents (``BufferRef.tokens``) are the tokens of one rank-``(b-1)`` stream: the input
tokens of the buffered run, with the closing stop ``S_s`` (``s >= b``) replaced by ``S_(b-1)``
(dropped when ``b = 1``), so ``to_nested(ref.tokens, b - 1)`` is the buffer as nested lists.
"""

import itertools
from dataclasses import dataclass, field

from ...compiler.dims import fmt_shape
from ...compiler.errors import StepRuntimeError
from ...compiler.ops.memory import Bufferize, Streamify
from ...compiler.types import Buffer
from ...contract.tokens import beat_index, from_nested, is_stop, stop
from ...contract.values import BufferRef
from .interpreter import fibre_sizes, semantics
from .ops_offchip import _closed, _map_nested, affine_walk

__all__ = ["LiveBuffer", "bufferize", "streamify", "check_buffer", "ordered_contents",
           "streamify_consumers", "freed"]


@dataclass
class LiveBuffer:
    """Bookkeeping of one live on-chip buffer of a running program.

    Attributes
    ----------
    owner : str
        The Bufferize node that filled it.
    tokens : list
        Its contents.
    pending : set of str
        Streamify nodes that may still replay it; the buffer is freed when this is empty.
    """
    owner: str
    tokens: list
    pending: set = field(default_factory=set)

    @property
    def refcount(self):
        return len(self.pending)


def check_buffer(contents, shape, symbols=None, *, op="Bufferize", beat=None):
    """Raise :class:`StepRuntimeError` if ``contents`` overflow a buffer of ``shape``.

    A static dimension may not be exceeded; a symbolic one may not exceed its bound (when
    ``symbols``, the program's :class:`~stepforge.compiler.dims.SymbolTable`, knows one). The
    message names the dimension (the symbol) and the measured value.
    """
    b = len(shape)
    sizes = fibre_sizes(contents, b - 1)
    for k in range(b):
        if not sizes[k]:
            continue
        d = shape[b - 1 - k]
        value = max(sizes[k])
        limit = d if isinstance(d, int) else (symbols.bound(d) if symbols is not None else None)
        if limit is not None and value > limit:
            where = f" at beat {beat}" if beat is not None else ""
            what = f"D_{k}" if isinstance(d, int) else str(d)
            over = f"static size {d}" if isinstance(d, int) else f"bound {limit}"
            raise StepRuntimeError(f"{op}: buffer dimension {what} is {value}{where}, over its {over} "
                                   f"(buffer {fmt_shape(shape)})", op=op, beat=beat)


def bufferize(tokens, b, *, shape=None, symbols=None, new_id=None, op="Bufferize"):
    """The tokens of a Bufferize: one :class:`BufferRef` per run closed by a stop ``>= b``.

    Parameters
    ----------
    tokens : list
        The input stream (rank ``>= b``).
    b : int
        Number of buffered dimensions.
    shape : tuple, optional
        The buffer's shape ``(D_{b-1}, .., D_0)``; when given, every buffer is checked with
        :func:`check_buffer`.
    symbols : SymbolTable, optional
        For the bounds of symbolic dimensions.
    new_id : callable, optional
        Returns the id of the next buffer (default: 0, 1, 2, ...).

    Raises
    ------
    StepRuntimeError
        The stream ends inside a buffer, or a buffer overflows ``shape``.
    """
    new_id = new_id or itertools.count().__next__
    out = []
    contents = []
    for i, t in enumerate(tokens):
        if is_stop(t) and t.level >= b:
            if b > 1:
                contents.append(stop(b - 1))
            if shape is not None:
                check_buffer(contents, shape, symbols, op=op, beat=beat_index(tokens, i))
            out.append(BufferRef(new_id(), contents))
            if t.level > b:
                out.append(stop(t.level - b))
            contents = []
        else:
            contents.append(t)
    if contents:
        beat = beat_index(tokens, len(tokens) - 1)
        n = sum(1 for t in contents if not is_stop(t))
        raise StepRuntimeError(f"{op}: the stream ended at beat {beat} inside an unclosed buffer "
                               f"({n} elements after the last stop >= S{b})", op=op, beat=beat)
    return out


def ordered_contents(ref, shape, order, *, op="Streamify", beat=None):
    """The contents of ``ref`` replayed in the affine ``order = (out_shape, stride, offset)``.

    Element ``offset + sum(idx_d * stride_d)`` of the buffer's row-major elements is replayed at
    index ``idx`` of the walk over ``out_shape``; the result is a rank-``(len(out_shape) - 1)``
    token stream. The buffer must fill its static ``shape`` exactly.
    """
    out_shape, stride, offset = order
    b = len(shape)
    sizes = fibre_sizes(ref.tokens, b - 1)
    full = all(len(sizes[k]) > 0 and all(v == shape[b - 1 - k] for v in sizes[k]) for k in range(b))
    if not full:
        where = f" at beat {beat}" if beat is not None else ""
        got = [sorted(set(sizes[k])) for k in reversed(range(b))]
        raise StepRuntimeError(f"{op}: buffer {ref.id}{where} does not fill its static shape "
                               f"{fmt_shape(shape)} (fibre sizes per dimension {got}); an affine "
                               f"replay order needs it full", op=op, beat=beat)
    elements = [t for t in ref.tokens if not is_stop(t)]
    depth = len(out_shape)
    nested = _map_nested(lambda k: elements[k], affine_walk(out_shape, stride, offset), depth)
    return from_nested(nested, depth - 1)


def streamify(buffers, b, *, repeat=None, ref=None, expand_rank=None, order=None, shape=None,
              on_last=None, op="Streamify"):
    """The tokens of a Streamify (see the operator for the three forms).

    Parameters
    ----------
    buffers : list
        Tokens of :class:`BufferRef` and stops.
    b : int
        Number of dimensions of the buffers (``len(Buffer.shape)``).
    repeat : int, optional
    ref : list, optional
        Tokens of the reference stream; needs ``expand_rank``.
    expand_rank : int, optional
    order : tuple, optional
        ``(out_shape, stride, offset)``; needs the static ``shape`` of the buffers.
    on_last : callable, optional
        ``on_last(buffer_ref)`` is called right after the last replay of each buffer.

    Raises
    ------
    StepRuntimeError
        Reference/buffer stop mismatch, a stream ending early, or a buffer that does not fill
        its shape under an affine order.
    """
    depth = len(order[0]) if order is not None else b
    last = {}
    for i, t in enumerate(buffers):
        if not is_stop(t):
            last[t.id] = i
    cache = {}

    def contents(i):
        r = buffers[i]
        if order is None:
            return r.tokens
        if r.id not in cache:
            cache[r.id] = ordered_contents(r, shape, order, op=op, beat=beat_index(buffers, i))
        return cache[r.id]

    def done(i):
        if on_last is not None and last[buffers[i].id] == i:
            on_last(buffers[i])

    if ref is not None:
        return _streamify_ref(buffers, ref, expand_rank, depth, contents, done, op)
    out = []
    extra = 1 if repeat is not None else 0
    n = len(buffers)
    i = 0
    while i < n:
        t = buffers[i]
        if is_stop(t):
            out.append(stop(t.level + depth + extra))
            i += 1
            continue
        s = buffers[i + 1].level if i + 1 < n and is_stop(buffers[i + 1]) else 0
        body = contents(i)
        if repeat is not None:
            for _ in range(repeat - 1):
                out.extend(_closed(body, depth))
            out.extend(_closed(body, depth + 1 + s))
        else:
            out.extend(_closed(body, depth + s))
        done(i)
        i += 2 if s else 1
    return out


def _streamify_ref(buffers, ref, c, depth, contents, done, op):
    out = []
    nb = len(buffers)
    bi = 0           # next unread token of the buffer stream
    current = None   # index of the buffer element being replayed
    pending = None   # the last replay, until the reference's stop on its element is known
    for ri, t in enumerate(ref):
        if not is_stop(t):
            if pending is not None:
                out.extend(_closed(pending, depth))
            if current is None:
                if bi >= nb or is_stop(buffers[bi]):
                    got = "the end of the buffers" if bi >= nb else f"stop {buffers[bi]!r} at beat {beat_index(buffers, bi)}"
                    rb = beat_index(ref, ri)
                    raise StepRuntimeError(f"{op}: reference element at beat {rb} needs a buffer, but "
                                           f"the buffer stream shows {got}", op=op, beat=rb)
                current = bi
                bi += 1
            pending = contents(current)
            continue
        r = t.level
        if pending is not None:
            out.extend(_closed(pending, depth + r))
            pending = None
        else:
            out.append(stop(depth + r))
        if r < c:
            continue
        # the repetition ends, possibly after zero replays of a buffer
        if current is None and bi < nb and not is_stop(buffers[bi]):
            current = bi
            bi += 1
        if bi >= nb or not is_stop(buffers[bi]) or buffers[bi].level != r:
            rb = beat_index(ref, ri)
            if bi >= nb:
                got = "the end of the buffers"
            elif not is_stop(buffers[bi]):
                got = f"a buffer at beat {beat_index(buffers, bi)}"
            else:
                got = f"stop {buffers[bi]!r} at beat {beat_index(buffers, bi)}"
            raise StepRuntimeError(f"{op}: reference stop S{r} at beat {rb} ends a repetition, but "
                                   f"the buffer stream shows {got}", op=op, beat=rb)
        bi += 1
        if current is not None:
            done(current)
            current = None
    if pending is not None:
        out.extend(_closed(pending, depth))
    if current is not None or bi != nb:
        raise StepRuntimeError(f"{op}: the reference ended but the buffer stream has {nb - bi} more "
                               f"tokens", op=op)
    return out


def streamify_consumers(program, stream):
    """Names of the Streamify nodes that can replay the buffers of ``stream``.

    Follows every path of ``Buffer``-typed streams (through shape operators, Broadcast, routing)
    and stops at the ``buffers`` port of each Streamify. The size of the set is the reference
    count a buffer starts with.
    """
    consumers = program.consumers()
    found = set()
    seen = {stream}
    todo = [stream]
    while todo:
        s = todo.pop()
        for node, port in consumers.get(s, ()):
            if isinstance(node, Streamify):
                if node.input_names[port] == "buffers":
                    found.add(node.name)
                continue
            for o in node.outputs:
                if isinstance(o.dtype, Buffer) and o not in seen:
                    seen.add(o)
                    todo.append(o)
    return found


def freed(ctx):
    """The ids of the buffers freed so far, in order (``ctx.freed``)."""
    return ctx.freed


def _release(ctx, buffer_id, consumer):
    rec = ctx.live_buffers.get(buffer_id)
    if rec is None:
        return
    rec.pending.discard(consumer)
    if not rec.pending:
        del ctx.live_buffers[buffer_id]
        freed(ctx).append(buffer_id)


# -- registration ------------------------------------------------------------------------------

@semantics(Bufferize)
def _bufferize(node, ins, ctx):
    freed(ctx)
    consumers = streamify_consumers(ctx.program, node.outputs[0])

    def new_id():
        i = ctx.next_buffer_id
        ctx.next_buffer_id += 1
        return i
    out = bufferize(ins[0], node.b, shape=node.buffer.shape, symbols=node.program.symbols,
                    new_id=new_id, op=node.name)
    for t in out:
        if not is_stop(t):
            ctx.live_buffers[t.id] = LiveBuffer(node.name, t.tokens, set(consumers))
    return [out]


@semantics(Streamify)
def _streamify(node, ins, ctx):
    freed(ctx)
    buffers = ins[0]
    for i, t in enumerate(buffers):
        if not is_stop(t) and t.id not in ctx.live_buffers:
            b = beat_index(buffers, i)
            raise StepRuntimeError(f"{node.name}: buffer {t.id} at beat {b} is not live (already "
                                   f"freed)", op=node.name, beat=b)
    out = streamify(buffers, len(node.buffer.shape), repeat=node.repeat,
                    ref=ins[1] if node.ref is not None else None, expand_rank=node.expand_rank,
                    order=node.order, shape=node.buffer.shape,
                    on_last=lambda r: _release(ctx, r.id, node.name), op=node.name)
    for bid, rec in list(ctx.live_buffers.items()):
        if node.name in rec.pending:  # buffers this consumer never received
            _release(ctx, bid, node.name)
    return [out]
