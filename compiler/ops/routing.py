"""Routing operators: data-dependent control of where chunks go (spec section 4, "Routing").

A *chunk* at rank ``b`` is one level-``b`` sub-tensor of a stream: everything up to and including
the first stop ``>= b`` (one element when ``b = 0``). Routing operators move whole chunks; they
never split or interleave one.

=====================================  =========================================================
operator                               outputs
=====================================  =========================================================
``Partition(x, select, n, b)``         ``out0 .. out{n-1}``, each ``[N_i, D_{b-1}..D_0]``
``Reassemble(streams, select, b)``     ``select.shape + [D_sel, D_{b-1}..D_0]``
``EagerMerge(streams, b)``             ``data [sum D^i_b, D_{b-1}..D_0]``, ``select [sum D^i_b]``
``Broadcast(x, n)``                    ``out0 .. out{n-1}``, each ``x.shape``
``Parallelize(x, n, b)``               ``out0 .. out{n-1}``, each ``[D / n, D_{b-1}..D_0]``
=====================================  =========================================================

Routing operators hold no data in the paper's memory model: their :meth:`onchip_bytes` is 0.
The decisions taken where the spec is silent are listed in ``docs/routing.md``.
"""

import sympy

from ..dims import dim_eq, fmt_shape, is_static, product
from ..errors import StepShapeError, StepTypeError
from ..graph import Node, Stream
from ..types import Select, Tile

__all__ = ["Partition", "Reassemble", "EagerMerge", "Broadcast", "Parallelize"]


def _bound_of_product(symbols, dims):
    """An ``int`` upper bound of the product of ``dims``, or ``None`` if one is unbounded."""
    total = 1
    for d in dims:
        b = symbols.bound(d)
        if b is None:
            return None
        total *= b
    return total


def _check_select(node, sel, n, shape_of_data=None):
    """``sel`` must carry ``Select(n)`` elements (StepTypeError on port 'select')."""
    if not isinstance(sel.dtype, Select) or sel.dtype.n != n:
        where = f" (data {fmt_shape(shape_of_data)})" if shape_of_data is not None else ""
        raise node._err(StepTypeError, "select", f"needs a stream of Select({n}), got "
                        f"{sel.dtype!r} of shape {fmt_shape(sel.shape)}{where}")


def _stream_list(node_cls_name, streams):
    """``streams`` as a list: a list/tuple of streams, or a multi-output node (all its outputs)."""
    if isinstance(streams, Stream):
        raise StepTypeError(f"{node_cls_name}: port 'in0' expects a list of streams, got the single "
                            f"stream {streams.name} {fmt_shape(streams.shape)} (wrap it: [x])",
                            op=node_cls_name, port="in0")
    if isinstance(streams, Node):
        return list(streams.outputs)
    if not isinstance(streams, (list, tuple)):
        raise StepTypeError(f"{node_cls_name}: port 'in0' expects a list of streams, got "
                            f"{type(streams).__name__} {streams!r}", op=node_cls_name, port="in0")
    return list(streams)


def _check_same_inner(node, streams, b, *, ragged_rows=False):
    """Every stream has rank ``b``, the element type of ``in0`` and its ``b`` inner dims.

    With ``ragged_rows`` (EagerMerge), dynamic tiles whose row counts differ are accepted when
    :func:`_merged_rows_bound` admits them.
    """
    first = streams[0]
    for i, s in enumerate(streams):
        if s.rank != b:
            raise node._err(StepShapeError, f"in{i}", f"must be a rank-{b} stream (one chunk per "
                            f"tensor), got rank {s.rank}: in0 {fmt_shape(first.shape)} vs in{i} "
                            f"{fmt_shape(s.shape)}")
        if s.dtype != first.dtype and not (ragged_rows and _rows_differ_only(first.dtype,
                                                                              s.dtype)):
            why = ", or a dynamic tile of its dtype and columns" if ragged_rows else ""
            raise node._err(StepTypeError, f"in{i}", f"must carry the element type of in0{why}: "
                            f"in0 {first.dtype!r} {fmt_shape(first.shape)} vs in{i} "
                            f"{s.dtype!r} {fmt_shape(s.shape)}")
        if not all(dim_eq(a, c) for a, c in zip(s.shape[1:], first.shape[1:])):
            raise node._err(StepShapeError, f"in{i}", f"must have the inner dimensions of in0: in0 "
                            f"{fmt_shape(first.shape)} vs in{i} {fmt_shape(s.shape)}")


def _rows_differ_only(a, c):
    """Whether ``a`` and ``c`` are tiles of one dtype and column count, both with a dynamic
    (symbolic) row count."""
    return (isinstance(a, Tile) and isinstance(c, Tile) and a.dtype == c.dtype
            and dim_eq(a.cols, c.cols) and not is_static(a.rows) and not is_static(c.rows))


def _merged_elem(node, streams):
    """EagerMerge's output element type: the inputs' common one, or a tile whose row count is a
    fresh ragged symbol bounded by the largest input bound (StepTypeError on the first input
    whose row count has no bound)."""
    first = streams[0].dtype
    if all(s.dtype == first for s in streams):
        return first
    symbols = node.program.symbols
    bounds = []
    for i, s in enumerate(streams):
        bound = symbols.bound(s.dtype.rows)
        if bound is None:
            raise node._err(StepTypeError, f"in{i}", f"merges tiles of different row counts, so "
                            f"every row count needs a bound: in{i} {s.dtype!r} "
                            f"{fmt_shape(s.shape)} has none (in0 {first!r} "
                            f"{fmt_shape(streams[0].shape)})")
        bounds.append(bound)
    rows = symbols.fresh("EM", ragged=True, bound=max(bounds), origin=node.name)
    return Tile(first.dtype, rows, first.cols)


class _Fanout:
    """Mixin: ``n`` outputs named ``out0 .. out{n-1}``."""

    @property
    def output_names(self):
        return tuple(f"out{i}" for i in range(self.n))


class Partition(_Fanout, Node):
    """Route each rank-``b`` chunk of ``stream`` to the outputs its selector element names.

    Parameters
    ----------
    stream : Stream
        The data, ``[D_a..D_b, D_{b-1}..D_0]``.
    select : Stream
        ``Select(n)`` elements of shape ``[D_a..D_b]`` (rank ``a - b``): one selector element per
        chunk. A selector stop ``S_k`` requires the data chunk to end with ``S_(k+b)``; a
        stop-only selector beat ``S_k`` (an empty selector fibre) requires a stop-only data beat
        ``S_(k+b)``.
    n : int
        Number of outputs.
    b : int
        Chunk rank, ``0 <= b <= a``.
    drop : bool
        Whether a selector element with no bit set drops its chunk (the default) or is a
        run-time error.

    Outputs
    -------
    out0 .. out{n-1}
        ``[N_i, D_{b-1}..D_0]``: one tensor per chunk routed to output ``i`` (the chunk's
        terminating stop becomes ``S_b``; no stop when ``b = 0``). ``N_i`` is a dynamic symbol
        counting the selector elements with bit ``i`` set, bounded by the selector's
        cardinality bound; every Partition driven by the same selector stream shares it, so
        co-partitioned streams can be zipped.
    """

    def __init__(self, stream, select, n, b, *, drop=True, name=None):
        super().__init__(Node._program_of(stream, select), [stream, select], name=name,
                         input_names=["in0", "select"])
        x, sel = self.inputs
        self.n = self._int_param("in0", "n", n, 1, None, x.shape)
        self.b = self._int_param("in0", "b", b, 0, x.rank, x.shape)
        if not isinstance(drop, bool):
            raise self._err(StepTypeError, "in0", f"needs drop to be a bool, got {drop!r}")
        self.drop = drop
        self.params = {"n": n, "b": b}
        if not drop:
            self.params["drop"] = False
        _check_select(self, sel, n, x.shape)
        above = x.shape[:len(x.shape) - b]
        if sel.rank != x.rank - b or not all(dim_eq(p, q) for p, q in zip(sel.shape, above)):
            raise self._err(StepShapeError, "select", f"must have the data's dimensions above "
                            f"b={b} ({fmt_shape(above)} of data {fmt_shape(x.shape)}), got "
                            f"{fmt_shape(sel.shape)}")
        symbols = self.program.symbols
        bound = _bound_of_product(symbols, sel.shape)
        inner = x.shape[len(x.shape) - b:]
        for i in range(n):
            self._output((self._count_symbol(sel, i, bound),) + inner, x.dtype)
        self._register()

    def _count_symbol(self, sel, i, bound):
        """The number of elements of ``sel`` that name output ``i`` (shared per selector stream)."""
        symbols = self.program.symbols
        name = f"N_{sel.name}_{i}".replace(".", "_")
        origin = f"Partition by {sel.name}"
        sym = sympy.Symbol(name, integer=True, nonnegative=True)
        if sym in symbols:
            if symbols.info(sym).origin == origin:
                return sym
            return symbols.fresh(name, ragged=False, bound=bound, origin=origin)
        return symbols.symbol(name, bound=bound, origin=origin)

    def onchip_bytes(self):
        return 0


class Reassemble(Node):
    """For each selector element, concatenate one chunk of every selected input, in ascending
    input index, and close a new dimension.

    Parameters
    ----------
    streams : list of Stream, or a multi-output node
        ``n`` rank-``b`` streams ``[D^i, D_{b-1}..D_0]`` of one element type (e.g. the outputs
        of a :class:`Partition`, possibly transformed).
    select : Stream
        ``Select(n)`` elements of any shape.
    b : int
        Chunk rank (``>= 0``).
    count : int, optional
        The number of inputs every selector element names (1 for one-hot, 2 for top-2
        routing). When given, ``D_sel = count`` and the interpreter checks every mask;
        otherwise ``D_sel`` is a fresh ragged symbol bounded by ``n``.

    Outputs
    -------
    out
        ``select.shape + [D_sel, D_{b-1}..D_0]``. A selector element with stop ``S_k`` closes
        its group with ``S_(b+1+k)``; a stop-only selector beat ``S_k`` becomes a stop-only
        ``S_(b+1+k)``.
    """

    def __init__(self, streams, select, b, *, count=None, name=None):
        streams = _stream_list(type(self).__name__, streams)
        n = len(streams)
        super().__init__(Node._program_of(streams, select), streams + [select], name=name,
                         input_names=[f"in{i}" for i in range(n)] + ["select"])
        *ins, sel = self.inputs
        if n == 0:
            raise self._err(StepShapeError, "in0", f"needs at least one input stream, got none "
                            f"(select {fmt_shape(sel.shape)})")
        self.n = n
        self.b = self._int_param("in0", "b", b, 0, None, ins[0].shape)
        if count is not None:
            self._int_param("select", "count", count, 1, n, sel.shape)
        self.count = count
        self.params = {"b": b}
        if count is not None:
            self.params["count"] = count
        _check_same_inner(self, ins, b)
        _check_select(self, sel, n, ins[0].shape)
        if count is None:
            d_sel = self.program.symbols.fresh("G", ragged=True, bound=n, origin=self.name)
        else:
            d_sel = count
        self._output(tuple(sel.shape) + (d_sel,) + ins[0].shape[1:], ins[0].dtype)
        self._register()

    def onchip_bytes(self):
        return 0


class EagerMerge(Node):
    """Forward whole chunks from whichever input has one ready, with a one-hot selector naming it.

    Parameters
    ----------
    streams : list of Stream, or a multi-output node
        ``n`` rank-``b`` streams ``[D^i_b, D_{b-1}..D_0]`` of equal inner dimensions and one
        element type, or of tiles that differ only in a bounded dynamic row count (one dtype
        and column count, every row count symbolic and bounded).
    b : int
        Chunk rank (``>= 0``).

    Outputs
    -------
    data
        ``[sum_i D^i_b, D_{b-1}..D_0]``: the chunks, unchanged (each closed by ``S_b``). Tiles
        of different row counts become ``Tile(dtype, EM_k, cols)``, ``EM_k`` a fresh ragged
        symbol bounded by the largest input bound (``docs/routing.md``, decision 7).
    select
        ``[sum_i D^i_b]`` of ``Select(n)``: the one-hot source of each chunk.

    The order is timing-dependent in hardware; the interpreter uses round-robin over the inputs
    that still have chunks, starting at input 0. Compare orders with
    :func:`stepforge.sim.ref.eager.check_eager_merge`, never token by token.
    """
    output_names = ("data", "select")

    def __init__(self, streams, b, *, name=None):
        streams = _stream_list(type(self).__name__, streams)
        n = len(streams)
        super().__init__(Node._program_of(streams), streams, name=name,
                         input_names=[f"in{i}" for i in range(n)])
        ins = self.inputs
        if n == 0:
            raise self._err(StepShapeError, "in0", "needs at least one input stream, got none")
        self.n = n
        self.b = self._int_param("in0", "b", b, 0, None, ins[0].shape)
        self.params = {"b": b}
        _check_same_inner(self, ins, b, ragged_rows=True)
        elem = _merged_elem(self, ins)
        total = sum((sympy.sympify(s.shape[0]) for s in ins), sympy.Integer(0))
        total = self.program.symbols.absorb(total, hint="M", origin=self.name)
        self._output((total,) + ins[0].shape[1:], elem)
        self._output((total,), Select(n))
        self._register()

    def onchip_bytes(self):
        return 0


class Broadcast(_Fanout, Node):
    """Copy ``stream`` to ``n`` consumers; each output has its own FIFO (spec Decision).

    Inserted automatically on fan-out by :func:`stepforge.compiler.passes.insert_broadcasts`.
    """

    def __init__(self, stream, n, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        self.n = self._int_param("in0", "n", n, 1, None, x.shape)
        self.params = {"n": n}
        for _ in range(n):
            self._output(x.shape, x.dtype)
        self._register()

    def onchip_bytes(self):
        return 0


class Parallelize(_Fanout, Node):
    """Deal the rank-``b`` chunks of ``stream`` round-robin over ``n`` outputs.

    Chunk ``j`` (counted over the whole stream, the dimensions above ``b`` flattened) goes to
    output ``j mod n``; its terminating stop becomes ``S_b`` (no stop when ``b = 0``).

    Parameters
    ----------
    stream : Stream
        ``[D_a..D_b, D_{b-1}..D_0]``.
    n : int
        Number of outputs.
    b : int
        Chunk rank, ``0 <= b <= a``.

    Outputs
    -------
    out0 .. out{n-1}
        ``[D / n, D_{b-1}..D_0]`` with ``D = D_a * .. * D_b``. A static ``D`` must be a multiple
        of ``n``. A symbolic ``D`` gives every output a fresh dynamic symbol bounded by
        ``ceil(bound(D) / n)``; the first ``D mod n`` outputs then receive one chunk more.
    """

    def __init__(self, stream, n, b, *, name=None):
        super().__init__(Node._program_of(stream), [stream], name=name)
        x = self.inputs[0]
        self.n = self._int_param("in0", "n", n, 1, None, x.shape)
        self.b = self._int_param("in0", "b", b, 0, x.rank, x.shape)
        self.params = {"n": n, "b": b}
        above = x.shape[:len(x.shape) - b]
        inner = x.shape[len(x.shape) - b:]
        total = product(above)
        symbols = self.program.symbols
        if isinstance(total, int):
            if total % n:
                raise self._err(StepShapeError, "in0", f"deals {total} chunks (dimensions "
                                f"{fmt_shape(above)} above b={b} of {fmt_shape(x.shape)}) over "
                                f"{n} outputs: the count must be a multiple of {n}, output shape "
                                f"would be {fmt_shape([sympy.Rational(total, n)] + list(inner))}")
            dims = [total // n] * n
        else:
            bound = _bound_of_product(symbols, above)
            bound = None if bound is None else -(-bound // n)
            dims = [symbols.fresh("P", ragged=False, bound=bound, origin=self.name) for _ in range(n)]
        for d in dims:
            self._output((d,) + inner, x.dtype)
        self._register()

    def onchip_bytes(self):
        return 0
