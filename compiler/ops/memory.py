"""On-chip memory operators: Bufferize and Streamify (spec section 4).

``Bufferize(stream, b)`` stores the inner ``b`` dimensions of a stream into on-chip buffers and
emits one ``Buffer`` reference per buffer; ``Streamify`` replays buffers, once, ``repeat`` times,
or once per element of a reference stream, optionally in an affine order (e.g. a transpose).
A buffer is freed after its last replay; the reference count is the number of Streamify nodes
that can receive the reference (see ``docs/memory.md``).

Level bookkeeping: a ``Buffer`` of shape ``(D_{b-1}, .., D_0)`` (``b`` entries) holds the tokens
of one level-``b`` run; replayed, its last token carries ``S_b`` raised by the level that closes
the replay (the buffer element's own stop, the repeat dimension, or the reference's stop).
"""

import math

import sympy

from ..dims import dim_eq, fmt_shape, norm_dim
from ..errors import StepShapeError, StepTypeError
from ..graph import Node
from ..types import Buffer
from .offchip import affine_range

__all__ = ["Bufferize", "Streamify"]


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Bufferize(Node):
    """Store the inner ``b`` dimensions of ``stream`` into on-chip buffers.

    Input ``[D_a, .., D_b, D_{b-1}, .., D_0]`` of ``elem``; output ``[D_a, .., D_b]`` of
    ``Buffer(elem, (D_{b-1}, .., D_0))``. An incoming stop ``s >= b`` closes the buffer and emits a
    reference with stop ``s - b`` (no stop when ``s = b``).

    Parameters
    ----------
    stream : Stream
        Any element type but ``Buffer``; rank ``>= b``.
    b : int
        Number of buffered dimensions, ``1 <= b <= rank``.
    name : str, optional

    Raises
    ------
    StepShapeError
        ``b`` outside ``1..rank``.
    StepTypeError
        The stream carries buffer references.
    """

    def __init__(self, stream, b, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        if isinstance(x.dtype, Buffer):
            raise self._err(StepTypeError, "in0", f"cannot bufferize buffer references: {x.dtype!r} "
                            f"{fmt_shape(x.shape)}")
        if not _is_int(b) or not 1 <= b <= x.rank:
            raise self._err(StepShapeError, "in0", f"needs b in 1..{x.rank} (the input's rank), got "
                            f"{b!r} (input shape {fmt_shape(x.shape)})")
        self.b = b
        self.params = {"b": b}
        n = len(x.shape)
        self.buffer = Buffer(x.dtype, x.shape[n - b:])
        self._output(x.shape[:n - b], self.buffer)
        self._register()

    def onchip_bytes(self):
        elem = sympy.sympify(self.buffer.elem.nbytes())
        return norm_dim(elem + 2 * sympy.sympify(self.buffer.contents_nbytes()))


class Streamify(Node):
    """Replay buffers as streams.

    Forms (``B`` = the buffer's dimensions, ``buffers`` of shape ``[D_a..D_0]``):

    * plain (``repeat=None``, no ``ref``): each buffer once; output ``buffers.shape + B`` — the
      inverse of Bufferize;
    * ``repeat=n``: each buffer ``n`` times; output ``buffers.shape + [n] + B``. Every replay but
      the last closes with ``S_len(B)``, the last with ``S_(len(B) + 1 + s)`` where ``s`` is the
      buffer element's own stop;
    * ``ref=r, expand_rank=c``: ``buffers`` has ``c`` trailing size-1 dimensions where ``r`` has
      real ones; each buffer is replayed once per reference element until the reference shows a
      stop ``>= c``, whose level must equal the buffer element's own stop (checked at run time,
      like Expand); output ``ref.shape + B``.

    ``order=(out_shape, stride)`` or ``(out_shape, stride, offset)`` replays, instead of the
    buffer's own order, element ``offset + sum(idx_d * stride_d)`` (row-major element index) at
    each index of a walk over ``out_shape``; ``B`` is then ``out_shape``. Only for static buffer
    shapes.

    Parameters
    ----------
    buffers : Stream
        A stream of ``Buffer``.
    repeat : int, optional
        Static repeat count ``>= 1``.
    ref : Stream, optional
        Reference stream (contents ignored); needs ``expand_rank``.
    expand_rank : int, optional
        ``c``, ``1 <= c <= rank``.
    order : tuple, optional
        ``(out_shape, stride[, offset])``.
    name : str, optional
    """

    def __init__(self, buffers, repeat=None, *, ref=None, expand_rank=None, order=None, name=None):
        inputs, ports = [buffers], ["buffers"]
        if ref is not None:
            inputs.append(ref)
            ports.append("ref")
        super().__init__(Node._program_of(buffers, ref), inputs, name=name, input_names=ports)
        x = self.inputs[0]
        if not isinstance(x.dtype, Buffer):
            raise self._err(StepTypeError, "buffers", f"expects a stream of Buffer, got {x.dtype!r} "
                            f"{fmt_shape(x.shape)}")
        buf = x.dtype
        self.buffer = buf
        if repeat is not None and (not _is_int(repeat) or repeat < 1):
            raise self._err(StepShapeError, "buffers", f"needs repeat >= 1, got {repeat!r} "
                            f"(buffers {fmt_shape(x.shape)} of {buf!r})")
        if repeat is not None and ref is not None:
            raise self._err(StepShapeError, "ref", f"takes either repeat or ref, not both "
                            f"(buffers {fmt_shape(x.shape)}, ref {fmt_shape(self.inputs[1].shape)})")
        if (ref is None) != (expand_rank is None):
            what = "ref needs expand_rank" if ref is not None else "expand_rank needs ref"
            raise self._err(StepShapeError, "ref", f"{what} (buffers {fmt_shape(x.shape)}"
                            f"{', ref ' + fmt_shape(self.inputs[1].shape) if ref is not None else ''})")
        self.repeat = repeat
        self.expand_rank = expand_rank
        self.ref = self.inputs[1] if ref is not None else None
        self.params = {}
        if repeat is not None:
            self.params["repeat"] = repeat
        if ref is not None:
            r = self.ref
            if x.rank != r.rank:
                raise self._err(StepShapeError, "ref", f"must have the rank of the buffers: buffers "
                                f"{fmt_shape(x.shape)} vs ref {fmt_shape(r.shape)}")
            if not _is_int(expand_rank) or not 1 <= expand_rank <= x.rank:
                raise self._err(StepShapeError, "ref", f"needs expand_rank in 1..{x.rank}, got "
                                f"{expand_rank!r}: buffers {fmt_shape(x.shape)} vs ref {fmt_shape(r.shape)}")
            n = len(x.shape)
            for k in range(expand_rank):
                if not dim_eq(x.shape[n - 1 - k], 1):
                    raise self._err(StepShapeError, "buffers", f"needs its {expand_rank} innermost "
                                    f"dimensions to be 1: buffers {fmt_shape(x.shape)} vs ref "
                                    f"{fmt_shape(r.shape)}")
            for k in range(expand_rank, n):
                if not dim_eq(x.shape[n - 1 - k], r.shape[n - 1 - k]):
                    raise self._err(StepShapeError, "ref", f"must match the buffers outside the "
                                    f"{expand_rank} expanded dimensions: buffers {fmt_shape(x.shape)} "
                                    f"vs ref {fmt_shape(r.shape)}")
            self.params["expand_rank"] = expand_rank
        self.order = None
        inner = tuple(buf.shape)
        if order is not None:
            self.order = self._check_order(order, buf)
            inner = self.order[0]
            self.params["order"] = self.order
        self.depth = len(inner)
        outer = self.ref.shape if self.ref is not None else x.shape
        mid = (repeat,) if repeat is not None else ()
        self._output(tuple(outer) + mid + inner, buf.elem)
        self._register()

    def _check_order(self, order, buf):
        desc = f"order {order!r} for buffer {fmt_shape(buf.shape)}"
        if not all(isinstance(d, int) for d in buf.shape):
            raise self._err(StepShapeError, "buffers", f"needs a static buffer shape for an affine "
                            f"order, got buffer {fmt_shape(buf.shape)} ({desc})")
        if not isinstance(order, (tuple, list)) or len(order) not in (2, 3):
            raise self._err(StepShapeError, "buffers", f"needs order = (out_shape, stride[, offset]) ({desc})")
        out_shape, stride = order[0], order[1]
        offset = order[2] if len(order) == 3 else 0
        if (not isinstance(out_shape, (tuple, list)) or len(out_shape) == 0
                or not all(_is_int(d) and d > 0 for d in out_shape)):
            raise self._err(StepShapeError, "buffers", f"needs an order out_shape of static positive "
                            f"ints ({desc})")
        if (not isinstance(stride, (tuple, list)) or len(stride) != len(out_shape)
                or not all(_is_int(s) for s in stride) or not _is_int(offset)):
            raise self._err(StepShapeError, "buffers", f"needs one int stride per order dimension "
                            f"and an int offset ({desc})")
        size = math.prod(buf.shape)
        lo, hi = affine_range(out_shape, stride, offset)
        if lo < 0 or hi >= size:
            bad = lo if lo < 0 else hi
            raise self._err(StepShapeError, "buffers", f"replays element {bad}, outside buffer "
                            f"{fmt_shape(buf.shape)} of {size} elements (out_shape "
                            f"{fmt_shape(out_shape)}, stride {fmt_shape(stride)}, offset {offset})")
        return (tuple(out_shape), tuple(stride), offset)
