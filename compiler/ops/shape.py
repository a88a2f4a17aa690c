"""Shape operators: they relabel stop levels and move no data (spec section 4, last part)."""

import sympy

from ..dims import dim_eq, fmt_shape, nonzero, product
from ..errors import StepShapeError, StepTypeError
from ..graph import Node
from ..types import Bool, Tuple

__all__ = ["Flatten", "Reshape", "Promote", "Expand", "RepeatStatic", "Zip"]


class Flatten(Node):
    """Merge dimensions ``lo..hi`` (counted from the innermost, 0) into one.

    Stop ``s <= lo`` stays ``s``; ``lo < s <= hi`` becomes ``lo`` (0: no stop); ``s > hi``
    becomes ``s - (hi - lo)``. The merged size follows the absorbing rule.
    """

    def __init__(self, stream, lo, hi, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        self._int_param("in0", "lo", lo, 0, x.rank)
        self._int_param("in0", "hi", hi, lo + 1, x.rank)
        self.lo, self.hi = lo, hi
        self.params = {"lo": lo, "hi": hi}
        n = len(x.shape)
        merged = [x.shape[n - 1 - k] for k in range(lo, hi + 1)]
        size = self.program.symbols.absorb(product(merged), hint="F", origin=self.name)
        shape = x.shape[:n - 1 - hi] + (size,) + x.shape[n - lo:]
        self._output(shape, x.dtype)
        self._register()


class Reshape(Node):
    """Split dimension ``b`` into ``[ceil(D_b / chunk), chunk]``.

    For ``b = 0`` elements are counted and a partial chunk is padded with ``pad`` (a scalar that
    fills a tile of the element type); for ``b > 0`` stops of level ``>= b`` are counted and
    ``D_b`` must be a static multiple of ``chunk``. With ``flags=True`` the node has a second
    output, a ``Bool`` stream of the same shape that is true on padded elements.
    """

    def __init__(self, stream, chunk, b=0, *, pad=None, flags=False, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        self._int_param("in0", "chunk", chunk, 1)
        self._int_param("in0", "b", b, 0, x.rank)
        self.chunk, self.b, self.pad, self.flags = chunk, b, pad, flags
        self.params = {"chunk": chunk, "b": b}
        if pad is not None:
            self.params["pad"] = pad
        if flags:
            self.params["flags"] = True
        n = len(x.shape)
        d = x.shape[n - 1 - b]
        if b > 0:
            if not isinstance(d, int) or d % chunk:
                raise self._err(StepShapeError, "in0", f"splits dimension {b} of shape "
                                f"{fmt_shape(x.shape)} by {chunk}: D_{b} = {d} must be a static "
                                f"multiple of the chunk")
        elif chunk > 1 and pad is None:
            # a partial chunk can only be closed by padding
            if not (isinstance(d, int) and d % chunk == 0):
                raise self._err(StepShapeError, "in0", f"splits dimension 0 of shape "
                                f"{fmt_shape(x.shape)} into chunks of {chunk}: a partial chunk "
                                f"needs a pad value (pad=...)")
        if pad is not None and flags is False and not isinstance(pad, (int, float)):
            raise self._err(StepTypeError, "in0", f"pad must be a number that fills a tile, got {pad!r}")
        outer = -(-d // chunk) if isinstance(d, int) else sympy.ceiling(d / chunk)
        outer = self.program.symbols.absorb(outer, hint="R", origin=self.name)
        shape = x.shape[:n - 1 - b] + (outer, chunk) + x.shape[n - b:]
        self._output(shape, x.dtype)
        if flags:
            self._output(shape, Bool())
        self._register()

    @property
    def output_names(self):
        return ("out", "flags") if self.flags else ("out",)


class Promote(Node):
    """Insert a size-1 dimension at level ``b`` (default ``rank + 1``: a new outermost dimension).

    ``b <= rank``: stops ``>= b`` are incremented (``b = 0``: every element gets stop 1).
    ``b = rank + 1``: the whole stream becomes one tensor of size ``1 if D_N > 0 else 0``; the
    final tensor's closing stop becomes ``S_(N+1)`` and an empty stream stays empty.
    """

    def __init__(self, stream, b=None, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        if b is None:
            b = x.rank + 1
        self._int_param("in0", "b", b, 0, x.rank + 1)
        self.b = b
        self.params = {"b": b}
        n = len(x.shape)
        if b == x.rank + 1:
            d = x.shape[0]
            if isinstance(d, int):
                top = 1 if d > 0 else 0
            else:
                top = nonzero(d)
            shape = (top,) + x.shape
        else:
            shape = x.shape[:n - b] + (1,) + x.shape[n - b:]
        self._output(shape, x.dtype)
        self._register()


class Expand(Node):
    """Repeat each data element for every reference element until the reference stops at ``>= b``.

    The data stream has ``b`` trailing size-1 dimensions where the reference has real ones; the
    output has the reference's shape and stops and the data's element type. The data element's
    own stop must equal the reference stop that ends its repetition (checked at run time).
    """

    def __init__(self, stream, ref, b, *, name=None):
        super().__init__(Node._program_of(stream, ref), [stream, ref], name=name,
                         input_names=["in0", "ref"])
        x, r = self.inputs
        self._int_param("in0", "b", b, 1, x.rank)
        self.b = b
        self.params = {"b": b}
        if x.rank != r.rank:
            raise self._err(StepShapeError, "ref", f"must have the rank of the data: data "
                            f"{fmt_shape(x.shape)} vs ref {fmt_shape(r.shape)}")
        n = len(x.shape)
        for k in range(b):
            if not dim_eq(x.shape[n - 1 - k], 1):
                raise self._err(StepShapeError, "in0", f"needs its {b} innermost dimensions to "
                                f"be 1: data {fmt_shape(x.shape)} vs ref {fmt_shape(r.shape)}")
        for k in range(b, n):
            if not dim_eq(x.shape[n - 1 - k], r.shape[n - 1 - k]):
                raise self._err(StepShapeError, "ref", f"must match the data outside the "
                                f"{b} expanded dimensions: data {fmt_shape(x.shape)} vs ref "
                                f"{fmt_shape(r.shape)}")
        self._output(r.shape, x.dtype)
        self._register()


class RepeatStatic(Node):
    """Emit each element ``n`` times: a new innermost dimension of size ``n``."""

    def __init__(self, stream, n, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        self._int_param("in0", "n", n, 1)
        self.n = n
        self.params = {"n": n}
        self._output(x.shape + (n,), x.dtype)
        self._register()


class Zip(Node):
    """Pair streams of identical shape and stops into a stream of ``Tuple``."""

    def __init__(self, *streams, name=None):
        super().__init__(Node._program_of(*streams), list(streams), name=name)
        if len(self.inputs) < 2:
            raise self._err(StepShapeError, "in0", f"needs at least two streams, got {len(self.inputs)}")
        first = self.inputs[0]
        for i, s in enumerate(self.inputs[1:], 1):
            if s.rank != first.rank or not all(dim_eq(a, b) for a, b in zip(s.shape, first.shape)):
                raise self._err(StepShapeError, f"in{i}", f"must have the shape of in0: "
                                f"{fmt_shape(first.shape)} vs {fmt_shape(s.shape)}")
        self._output(first.shape, Tuple(*(s.dtype for s in self.inputs)))
        self._register()
