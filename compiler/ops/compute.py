"""Compute operators: the higher-order Map, Accum, Scan and FlatMap (spec section 4, Compute).

Map, Accum and Scan apply a :class:`~stepforge.compiler.functions.TileFunction` (a Python callable
is traced into one); FlatMap applies a :class:`~stepforge.compiler.functions.StreamFunction`.
RetileStreamify, Filter and AddrGen are FlatMap's library instances. Decisions the spec leaves
open are listed in ``docs/compute.md``.
"""

import math

import sympy

from .. import functions as F
from ..dims import dim_eq, fmt_shape, norm_dim, product
from ..errors import StepError, StepShapeError, StepTypeError
from ..graph import Node
from ..types import Tile, Tuple

__all__ = ["Map", "Accum", "Scan", "FlatMap", "RetileStreamify", "Filter", "AddrGen"]


def _lockstep_shapes(node):
    """Several inputs are consumed in lock step: they must have one shape."""
    first = node.inputs[0]
    for i, s in enumerate(node.inputs[1:], 1):
        if s.rank != first.rank or not all(dim_eq(a, b) for a, b in zip(s.shape, first.shape)):
            raise node._err(StepShapeError, node.input_names[i], f"must have the shape of "
                            f"{node.input_names[0]} (inputs are consumed in lock step): "
                            f"{fmt_shape(first.shape)} vs {fmt_shape(s.shape)}")


def _fn(node, fn):
    try:
        return F.as_function(fn)
    except TypeError:
        raise node._err(StepTypeError, "in0", f"needs a tile function (stepforge.compiler."
                        f"functions), got {fn!r}") from None


def _matmul_onchip(fn, types):
    """Paper model (spec section 5): ``16 x in_tile_cols + bytes(weight) + bytes(output)`` per
    matmul in ``fn``."""
    total = sympy.Integer(0)
    for a, b, out in fn.matmuls(*types):
        total = total + 16 * sympy.sympify(a.cols) + sympy.sympify(b.nbytes()) + out.nbytes()
    return norm_dim(total)


def _args_for(node, fn, lead, elem, ports):
    """The argument types of ``fn``: ``lead`` (e.g. the accumulator) then the stream element,
    unpacked when it is a tuple and ``fn`` takes one argument per field.

    Returns ``(types, unpack, arg_ports)``.
    """
    n = fn.arity - len(lead)
    if len(ports) == 1 and isinstance(elem[0], Tuple) and n == len(elem[0].elems) and n > 1:
        return list(lead) + list(elem[0].elems), True, [ports[0]] * n
    if n != len(elem):
        what = f"{len(elem)} stream{'s' if len(elem) != 1 else ''}"
        if len(elem) == 1 and isinstance(elem[0], Tuple):
            what += f" of {elem[0]!r}"
        raise node._err(StepTypeError, ports[0], f"applies {fn!r}, which takes {fn.arity} "
                        f"arguments, to {'the accumulator and ' if lead else ''}{what}")
    return list(lead) + list(elem), False, list(ports)


def _infer(node, fn, types, arg_ports, lead_port="in0"):
    try:
        return fn.infer(*types)
    except StepError as e:
        i = getattr(e, "arg", None)
        port = arg_ports[i] if i is not None and i < len(arg_ports) else lead_port
        raise node._err(type(e), port, f"fn {e}") from None


class Map(Node):
    """Apply ``fn`` to every element; with several streams, to the elements taken in lock step.

    Parameters
    ----------
    fn : TileFunction or callable
        Takes one argument per stream (or per field, for one stream of tuples).
    *streams : Stream
        One stream, or several of one shape (their stops must agree beat by beat at run time).

    The output has the input's shape and stops and ``fn``'s result type.
    """

    def __init__(self, fn, *streams, name=None):
        super().__init__(Node._program_of(*streams), list(streams), name=name)
        if not self.inputs:
            raise self._err(StepShapeError, "in0", "needs at least one stream")
        self.fn = _fn(self, fn)
        _lockstep_shapes(self)
        elems = [s.dtype for s in self.inputs]
        self.arg_types, unpack, ports = _args_for(self, self.fn, [], elems, self.input_names)
        self.unpack = unpack or len(self.inputs) > 1  # the element reaches fn as a tuple
        out = _infer(self, self.fn, self.arg_types, ports)
        self.params = {"fn": self.fn}
        self._output(self.inputs[0].shape, out)
        self._register()

    def flops(self):
        return norm_dim(sympy.sympify(self.program.cardinality(self.inputs[0]))
                        * self.fn.flops(*self.arg_types))

    def onchip_bytes(self):
        return _matmul_onchip(self.fn, self.arg_types)


def _split_b(streams, b, default):
    """``(streams, b)`` from ``Op(fn, init, *streams, b=...)`` or the spec's positional
    ``Op(fn, init, stream, b)``."""
    streams = list(streams)
    if b is None and streams and isinstance(streams[-1], int) and not isinstance(streams[-1], bool):
        b = streams.pop()
    return streams, (default if b is None else b)


class _Fold(Node):
    """What Accum and Scan share: the accumulator type and the argument types."""

    def _setup(self, fn, init, b, b_max, hint):
        x = self.inputs[0]
        _lockstep_shapes(self)
        self.fn = _fn(self, fn)
        self.b = self._int_param("in0", "b", b, 1, b_max)
        n = len(x.shape)
        count_dims = x.shape[n - self.b:]
        elems = [s.dtype for s in self.inputs]
        elem = elems[0] if len(elems) == 1 else Tuple(*elems)
        try:
            self.init = F.as_init(init, elem, self.fn)
        except StepError as e:
            raise self._err(type(e), "in0", f"init: {e}") from None
        acc = self.init.type
        self.arg_types, unpack, ports = _args_for(self, self.fn, [acc], elems, self.input_names)
        self.unpack = unpack or len(self.inputs) > 1
        res = _infer(self, self.fn, self.arg_types, ["in0"] + ports)
        if self.fn.accum is not None:
            grown = self.fn.accum_type(acc, x.dtype, product(count_dims))
            acc = self._grown(grown, hint)
        elif not res == acc:
            raise self._err(StepTypeError, "in0", f"fn {self.fn!r} returns {res!r} "
                            f"{fmt_shape(res.shape) if isinstance(res, Tile) else ''} for an "
                            f"accumulator of {acc!r} "
                            f"{fmt_shape(acc.shape) if isinstance(acc, Tile) else ''} (init "
                            f"{self.init!r}): the result must have the accumulator's type")
        self.acc_type = acc
        self.params = {"fn": self.fn, "init": self.init, "b": self.b}
        return acc

    def flops(self):
        return norm_dim(sympy.sympify(self.program.cardinality(self.inputs[0]))
                        * self.fn.flops(*self.arg_types))


class Accum(_Fold):
    """Fold the inner ``b`` dimensions: ``[D_a..D_b, D_(b-1)..D_0] -> [D_a..D_b]``.

    ``Accum(fn, init, stream, b)`` or ``Accum(fn, init, *streams, b=b)``.

    Parameters
    ----------
    fn : TileFunction or callable
        ``fn(acc, x)``; ``fn(acc, x1, x2, ...)`` for several streams (consumed in lock step, as in
        Map) or for one stream of tuples. It must return the accumulator's type, except for the
        retiling functions ``retile_row``/``retile_col``: their accumulator grows by one element
        per input (``[R, C]`` with ``R`` the number of elements folded, the basis of dynamic
        tiling).
    init : Init, tuple of Init, Tile type, number or None
        The accumulator's initial value, emitted as is for an empty level-``b`` fibre. A Tile type
        means zeros of it; a number fills the element type; ``None`` is the empty tile of a
        retiling ``fn``.
    *streams : Stream
    b : int
        ``1 <= b <= rank``.

    On an element the accumulator is updated. On a stop ``s >= b`` it is emitted (with stop
    ``s - b`` when ``s > b``) and reset to ``init``.
    """

    def __init__(self, fn, init, *streams, b=None, name=None):
        streams, b = _split_b(streams, b, None)
        super().__init__(Node._program_of(*streams), streams, name=name)
        if not self.inputs:
            raise self._err(StepShapeError, "in0", "needs a stream")
        x = self.inputs[0]
        if x.rank < 1:
            raise self._err(StepShapeError, "in0", f"needs a stream of rank >= 1 to fold, got "
                            f"{fmt_shape(x.shape)}")
        if b is None:
            raise self._err(StepShapeError, "in0", f"needs the rank b of the fold (input shape "
                            f"{fmt_shape(x.shape)})")
        acc = self._setup(fn, init, b, x.rank, "A")
        self._output(x.shape[:len(x.shape) - self.b], acc)
        self._register()

    def _grown(self, t, hint):
        # every emitted accumulator has folded one level-b fibre: its size is exact unless ragged
        sym = self.program.symbols
        rows = sym.absorb(t.rows, hint=hint, origin=self.name)
        cols = sym.absorb(t.cols, hint=hint, origin=self.name)
        return Tile(t.dtype, rows, cols)

    def onchip_bytes(self):
        mm = self.fn.matmuls(*self.arg_types)
        if mm:
            return _matmul_onchip(self.fn, self.arg_types)
        return self.acc_type.nbytes()

    @property
    def fold_size(self):
        """Elements of every fibre folded, when the ``b`` inner dimensions are static (results
        are then that many input beats apart), else None."""
        x = self.inputs[0]
        dims = x.shape[len(x.shape) - self.b:]
        return math.prod(dims) if all(isinstance(d, int) for d in dims) else None


class Scan(_Fold):
    """Like Accum, but emit the running accumulator after every element, with the input's stops.

    ``Scan(fn, init, stream, b=1)`` or ``Scan(fn, init, *streams, b=b)``. The accumulator resets
    after a stop ``>= b`` (``1 <= b <= rank + 1``; ``b = rank + 1`` never resets). The output has
    the input's shape. With a retiling ``fn`` the emitted tiles grow, so their size is a fresh
    ragged symbol.
    """

    def __init__(self, fn, init, *streams, b=None, name=None):
        streams, b = _split_b(streams, b, 1)
        super().__init__(Node._program_of(*streams), streams, name=name)
        if not self.inputs:
            raise self._err(StepShapeError, "in0", "needs a stream")
        x = self.inputs[0]
        acc = self._setup(fn, init, b, x.rank + 1, "S")
        self._output(x.shape, acc)
        self._register()

    def _grown(self, t, hint):
        # the running state grows after every element: its growing size is a fresh ragged symbol
        sym = self.program.symbols
        rows, cols = t.rows, t.cols
        if self.fn.accum == "rows":
            rows = sym.fresh(hint, ragged=True, bound=sym.bound(rows), origin=self.name)
        else:
            cols = sym.fresh(hint, ragged=True, bound=sym.bound(cols), origin=self.name)
        return Tile(t.dtype, rows, cols)

    def onchip_bytes(self):
        return self.acc_type.nbytes()


class FlatMap(Node):
    """Expand every element into a rank-``b`` sub-stream: ``[D_a..D_1, D_0] -> [D_a..D_1,
    D'_b..D'_0]``.

    Parameters
    ----------
    fn : StreamFunction
        ``retile_rows()``, ``retile_cols()``, ``keep_if()``, ``addr_gen(...)``.
    stream : Stream or sequence of Stream
        Several streams are consumed in lock step and given to ``fn`` as a tuple.
    b : int, optional
        The generated sub-streams' rank; ``fn`` fixes it (``None`` takes ``fn.b``).

    The sub-streams of one level-1 fibre are concatenated; the fibre's stop ``s`` is raised
    above them (``s + b`` on their last token). ``D'_b`` is ``D_0`` times the pieces each element
    yields (a fresh ragged symbol when that depends on the data).
    """

    def __init__(self, fn, stream, b=None, *, name=None, _ports=None):
        streams = list(stream) if isinstance(stream, (list, tuple)) else [stream]
        super().__init__(Node._program_of(*streams), streams, name=name, input_names=_ports)
        if not self.inputs:
            raise self._err(StepShapeError, "in0", "needs at least one stream")
        if not isinstance(fn, F.StreamFunction):
            raise self._err(StepTypeError, "in0", f"needs a stream function (retile_rows, "
                            f"retile_cols, keep_if, addr_gen), got {fn!r}")
        self.fn = fn
        if b is not None and b != fn.b:
            raise self._err(StepShapeError, "in0", f"b = {b!r}, but {fn!r} generates rank-{fn.b} "
                            f"sub-streams (input shape {fmt_shape(self.inputs[0].shape)})")
        self.b = fn.b
        _lockstep_shapes(self)
        x = self.inputs[0]
        elem = x.dtype if len(self.inputs) == 1 else Tuple(*(s.dtype for s in self.inputs))
        self.elem_type = elem
        try:
            out, per, inner = fn.infer(elem)
        except StepError as e:
            raise self._err(type(e), self.input_names[-1], f"fn {e} (input shape "
                            f"{fmt_shape(x.shape)})") from None
        sym = self.program.symbols
        d0 = x.shape[-1]
        if per is None:
            bound = sym.bound(product([d0, fn.max_per_elem(elem)]))
            outer = sym.fresh("FM", ragged=True, bound=bound, origin=self.name)
        else:
            outer = sym.absorb(product([d0, per]), hint="FM", origin=self.name)
        bounds = list(fn.max_inner(elem)) if any(d is None for d in inner) else []
        inner = tuple(sym.fresh("FM", ragged=True, bound=sym.bound(bounds[k]), origin=self.name)
                      if d is None else d for k, d in enumerate(inner))
        self.params = {"fn": fn}
        self._output(x.shape[:-1] + (outer,) + inner, out)
        self._register()


class RetileStreamify(FlatMap):
    """Split every ``[R, C]`` tile into its rows (``split="row"``: ``R`` tiles ``[1, C]``) or
    columns (``split="col"``: ``C`` tiles ``[R, 1]``).

    With ``b=0`` (the paper's form) the pieces join the input's innermost fibre
    (``[.., D_0] -> [.., D_0 * R]``); with ``b=1`` every tile's pieces form a fibre of their own
    (``[.., D_0] -> [.., D_0, R]``). With ``valid`` (an ``Index`` stream of the same shape) only the first ``valid`` rows (columns)
    of each tile are emitted: padded rows are dropped.
    """

    def __init__(self, stream, split="row", valid=None, *, b=0, name=None):
        if split not in ("row", "col"):
            raise StepShapeError(f"RetileStreamify: split must be 'row' or 'col', got {split!r}",
                                 op="RetileStreamify")
        try:
            fn = F.retile_rows(valid=valid is not None, b=b) if split == "row" else \
                F.retile_cols(valid=valid is not None, b=b)
        except StepError as e:
            raise type(e)(f"RetileStreamify: {e}", op="RetileStreamify") from None
        if valid is None:
            super().__init__(fn, stream, b, name=name)
        else:
            super().__init__(fn, [stream, valid], b, name=name, _ports=["in0", "valid"])
        self.split = split
        self.params = {"split": split, "b": b} if b else {"split": split}


class Filter(FlatMap):
    """Keep the elements whose flag (a ``Bool`` stream of the same shape) equals ``keep``.

    ``Filter(x, pad_flags, keep=False)`` drops the elements that Reshape padded.
    """

    def __init__(self, stream, flags, *, keep=True, name=None):
        super().__init__(F.keep_if(keep), [stream, flags], 0, name=name, _ports=["in0", "flags"])
        self.keep = bool(keep)
        self.params = {"keep": self.keep}


class AddrGen(FlatMap):
    """Expand every value ``v`` (an ``Index``, a one-hot ``Select`` or an integer ``[1, 1]``
    tile) into a rank-``len(shape) - 1`` sub-stream of ``Index`` addresses ``offset + scale * v +
    sum(i[k] * strides[k])`` over the multi-indices of ``shape`` (e.g. an expert id into the tile
    addresses of its weights).

    With ``count`` (an ``Index`` stream of the same shape) the innermost dimension of each
    element's walk has ``count`` indices instead of ``shape[-1]`` (its bound; ``0 <= count <=
    shape[-1]``, checked at run time): a ragged range of addresses per element, e.g. a
    request's ``L_b`` keys from its base address, ``AddrGen(base, (1, Lmax), (0, 1),
    count=lengths)``."""

    def __init__(self, stream, shape, strides, *, scale=1, offset=0, count=None, name=None):
        try:
            fn = F.addr_gen(shape, strides, scale=scale, offset=offset,
                            counted=count is not None)
        except StepError as e:
            raise type(e)(f"AddrGen: {e}", op="AddrGen") from None
        if count is None:
            super().__init__(fn, stream, None, name=name)
        else:
            super().__init__(fn, [stream, count], None, name=name, _ports=["in0", "count"])
        self.params = dict(fn.params)
