"""Off-chip memory operators: tiled reads and writes of the program's tensors (spec section 4).

A :class:`~stepforge.compiler.graph.Tensor` is a 2-D row-major array in off-chip memory. Cut into
``tr x tc`` tiles it is a *tile grid* of ``rows/tr`` x ``cols/tc`` tiles, numbered row-major: tile
``(i, j)`` has the *linear tile index* ``i * (cols/tc) + j``. Every operator here addresses memory
in linear tile indices.

=========================================================  =======================================
operator                                                   streams
=========================================================  =======================================
``LinearOffChipLoad(tensor, tile, out_shape, stride)``     an affine walk of tiles (optionally
                                                           once per ``ref`` element)
``LinearOffChipStore(stream, tensor)``                     a sink: tiles to consecutive positions
``RandomOffChipLoad(addr, tensor, tile)``                  one tile per address (gather)
``RandomOffChipStore(addr, data, tensor)``                 scatter; a ``Bool`` acknowledgement
=========================================================  =======================================

Metrics (spec section 5): off-chip traffic is ``cardinality(stream) x bytes(tile)``; the on-chip
requirement is ``2 x bytes(tile)`` (double buffering). Loads read tensors of role ``"input"`` or
``"inout"``; stores write tensors of role ``"output"`` or ``"inout"``. See ``docs/memory.md``.
"""

import math

import sympy

from ..dims import fmt_shape, norm_dim
from ..errors import StepShapeError, StepTypeError
from ..graph import Node, Tensor
from ..types import Bool, Index, Tile

__all__ = ["LinearOffChipLoad", "LinearOffChipStore", "RandomOffChipLoad", "RandomOffChipStore",
           "affine_range"]


def affine_range(out_shape, stride, offset=0):
    """The smallest and largest index of the affine walk ``offset + sum(idx_d * stride_d)``.

    Parameters
    ----------
    out_shape : tuple of int
        Sizes of the walk, outermost first (every size >= 1).
    stride : tuple of int
        Step of each dimension (0 re-reads, negative walks backwards).
    offset : int
        Index of the walk's first element.

    Returns
    -------
    (int, int)
    """
    lo = hi = offset
    for n, s in zip(out_shape, stride):
        span = s * (n - 1)
        lo += min(0, span)
        hi += max(0, span)
    return lo, hi


def _check_tensor(op, tensor, port="tensor"):
    if not isinstance(tensor, Tensor):
        raise StepTypeError(f"{op}: port '{port}' expects an off-chip Tensor (Program.tensor), got "
                            f"{type(tensor).__name__} {tensor!r}", op=op, port=port)


def _op_name(cls, name):
    return name if name is not None else cls.__name__


def _tile_param(node, tensor, tile):
    """Check ``tile`` = ``(tr, tc)`` against ``tensor``; return the tile grid ``(rows, cols)``."""
    if (not isinstance(tile, (tuple, list)) or len(tile) != 2
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in tile)):
        raise node._err(StepShapeError, "tensor", f"needs a tile of two positive ints (rows, cols), "
                        f"got {tile!r} for tensor {tensor.name} {fmt_shape(tensor.shape)}")
    tr, tc = tile
    rows, cols = tensor.shape
    if rows % tr or cols % tc:
        raise node._err(StepShapeError, "tensor", f"tile {fmt_shape(tile)} does not divide tensor "
                        f"{tensor.name} {fmt_shape(tensor.shape)}")
    return rows // tr, cols // tc


def _same_program(node, tensor, port="tensor"):
    if tensor.program is not node.program:
        raise node._err(StepShapeError, port, f"tensor {tensor.name} {fmt_shape(tensor.shape)} "
                        f"belongs to another program ({tensor.program.name}, not {node.program.name})")


def _role(node, tensor, allowed, what):
    if tensor.role not in allowed:
        raise node._err(StepTypeError, "tensor", f"{what} tensor {tensor.name} "
                        f"{fmt_shape(tensor.shape)} of role {tensor.role!r} (needs "
                        f"{' or '.join(repr(r) for r in allowed)})")


def _static_tile_stream(node, port, stream, tensor):
    """Check a stream of tiles that is written into ``tensor``; return its tile ``(tr, tc)``."""
    t = stream.dtype
    if not isinstance(t, Tile):
        raise node._err(StepTypeError, port, f"expects a stream of Tile, got {t!r} "
                        f"{fmt_shape(stream.shape)} for tensor {tensor.name} {fmt_shape(tensor.shape)}")
    if not t.is_static:
        raise node._err(StepShapeError, port, f"needs static-shape tiles to write tensor "
                        f"{tensor.name} {fmt_shape(tensor.shape)}, got tile {fmt_shape(t.shape)}")
    if t.dtype != tensor.dtype:
        raise node._err(StepTypeError, port, f"writes {t!r} into tensor {tensor.name} "
                        f"{fmt_shape(tensor.shape)} of {tensor.dtype!r}: the dtypes differ")
    return (t.rows, t.cols)


def _is_count(program, expr):
    expr = norm_dim(expr)
    return (not isinstance(expr, int)) and any(
        program.symbols.info(s).kind == "count" for s in expr.free_symbols if s in program.symbols)


class _OffChip(Node):
    """Shared metrics of the off-chip operators."""

    @property
    def tile_type(self):
        """The ``Tile`` moved by one access."""
        return Tile(self.tensor.dtype, *self.tile)

    def onchip_bytes(self):
        return 2 * self.tile_type.nbytes()


class LinearOffChipLoad(_OffChip):
    """Read tiles of ``tensor`` in an affine order.

    Element ``k`` of the walk over ``out_shape`` (index vector ``idx``, outermost first) reads the
    tile with linear index ``offset + sum(idx_d * stride_d)``. The output is ``[1] + out_shape`` of
    ``Tile(tensor.dtype, tr, tc)``; its tokens are exactly those of the nested read (one tensor of
    rank ``len(out_shape)``). With ``ref`` the whole read repeats once per reference element, the
    output is ``ref.shape + out_shape`` and the reference's stop ``r`` on an element raises the stop
    of the last tile of that read by ``r``; a stop-only reference beat (an empty reference fibre)
    becomes a stop raised by ``len(out_shape)``.

    Parameters
    ----------
    tensor : Tensor
        A tensor of role ``"input"`` or ``"inout"``.
    tile : (int, int)
        Tile rows and columns; they must divide the tensor's.
    out_shape : tuple of int
        Sizes of the walk (static, positive), outermost first; ``()`` reads one tile.
    stride : tuple of int
        Stride of each walk dimension in tiles (0 = re-read the same tiles).
    offset : int
        Linear index of the first tile.
    ref : Stream, optional
        A trigger stream; its contents are ignored.
    name : str, optional

    Raises
    ------
    StepShapeError
        The tile does not divide the tensor, the walk is malformed, or any tile it reads lies
        outside the tensor (there is no wrap-around).
    StepTypeError
        ``tensor`` is not a readable Tensor.
    """

    def __init__(self, tensor, tile, out_shape, stride, *, offset=0, ref=None, name=None):
        op = _op_name(type(self), name)
        _check_tensor(op, tensor)
        if ref is None:
            super().__init__(tensor.program, [], name=name)
        else:
            super().__init__(Node._program_of(ref), [ref], name=name, input_names=["ref"])
            _same_program(self, tensor)
        self.tensor = tensor
        _role(self, tensor, ("input", "inout"), "reads")
        self.grid = _tile_param(self, tensor, tile)
        self.tile = (tile[0], tile[1])
        walk = f"(out_shape {out_shape!r}, stride {stride!r}, tensor {tensor.name} {fmt_shape(tensor.shape)})"
        if (not isinstance(out_shape, (tuple, list))
                or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in out_shape)):
            raise self._err(StepShapeError, "out", f"needs out_shape of static positive ints {walk}")
        if (not isinstance(stride, (tuple, list)) or len(stride) != len(out_shape)
                or not all(isinstance(s, int) and not isinstance(s, bool) for s in stride)):
            raise self._err(StepShapeError, "out", f"needs one int stride per out_shape dimension {walk}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise self._err(StepShapeError, "out", f"needs an int offset, got {offset!r} {walk}")
        self.out_shape = tuple(out_shape)
        self.stride = tuple(stride)
        self.offset = offset
        ntiles = self.grid[0] * self.grid[1]
        lo, hi = affine_range(self.out_shape, self.stride, offset)
        if lo < 0 or hi >= ntiles:
            bad = lo if lo < 0 else hi
            raise self._err(StepShapeError, "tensor", f"reads tile {bad}, outside tensor {tensor.name} "
                            f"{fmt_shape(tensor.shape)} of {self.grid[0]}x{self.grid[1]} = {ntiles} tiles "
                            f"{fmt_shape(self.tile)} (walk out_shape {fmt_shape(self.out_shape)}, stride "
                            f"{fmt_shape(self.stride)}, offset {offset})")
        self.ref = self.inputs[0] if ref is not None else None
        self.params = {"tensor": tensor.name, "tile": self.tile, "out_shape": self.out_shape,
                       "stride": self.stride}
        if offset:
            self.params["offset"] = offset
        outer = self.ref.shape if self.ref is not None else (1,)
        self._output(tuple(outer) + self.out_shape, self.tile_type)
        self._register()

    def tile_indices(self):
        """The linear tile index of every element of one read, as nested lists (outermost first)."""
        def walk(d, base):
            if d == len(self.out_shape):
                return base
            return [walk(d + 1, base + i * self.stride[d]) for i in range(self.out_shape[d])]
        return walk(0, self.offset)

    def offchip_read_bytes(self):
        # = cardinality(output) x bytes(tile); written through the reference's cardinality so a
        # ragged reference keeps its own count symbol (n_<ref>) instead of a new one
        reads = sympy.Integer(math.prod(self.out_shape))
        if self.ref is not None:
            reads = reads * sympy.sympify(self.program.cardinality(self.ref))
        return norm_dim(reads * self.tile_type.nbytes())


class LinearOffChipStore(_OffChip):
    """Write a stream of static-shape tiles to consecutive tile positions of ``tensor``.

    The ``k``-th element goes to linear tile index ``k`` (row-major over the tile grid); stops are
    consumed. A sink: the node has no outputs.

    Parameters
    ----------
    stream : Stream
        Tiles of ``tensor``'s dtype whose static shape divides the tensor's.
    tensor : Tensor
        A tensor of role ``"output"`` or ``"inout"``.
    name : str, optional

    Raises
    ------
    StepShapeError
        The tiles do not divide the tensor; a static cardinality differs from the tensor's tile
        count, or a symbolic cardinality's bound exceeds it.
    StepTypeError
        Not a stream of tiles of the tensor's dtype, or not a writable Tensor.
    """
    output_names = ()

    def __init__(self, stream, tensor, *, name=None):
        op = _op_name(type(self), name)
        _check_tensor(op, tensor)
        super().__init__(Node._program_of(stream), [stream], name=name)
        _same_program(self, tensor)
        self.tensor = tensor
        _role(self, tensor, ("output", "inout"), "writes")
        x = self.inputs[0]
        tile = _static_tile_stream(self, "in0", x, tensor)
        self.grid = _tile_param(self, tensor, tile)
        self.tile = tile
        ntiles = self.grid[0] * self.grid[1]
        card = self.program.cardinality(x)
        if isinstance(card, int):
            if card != ntiles:
                raise self._err(StepShapeError, "in0", f"stream {fmt_shape(x.shape)} holds {card} tiles "
                                f"{fmt_shape(tile)}, tensor {tensor.name} {fmt_shape(tensor.shape)} "
                                f"holds {ntiles}")
        else:
            bound = self.program.symbols.bound(card)
            if bound is not None and bound > ntiles:
                raise self._err(StepShapeError, "in0", f"stream {fmt_shape(x.shape)} may hold up to "
                                f"{bound} tiles {fmt_shape(tile)} ({card}), tensor {tensor.name} "
                                f"{fmt_shape(tensor.shape)} holds {ntiles}")
        self.params = {"tensor": tensor.name}
        self._register()

    def offchip_write_bytes(self):
        return norm_dim(sympy.sympify(self.program.cardinality(self.inputs[0])) * self.tile_type.nbytes())


class RandomOffChipLoad(_OffChip):
    """Read one tile of ``tensor`` per address (a linear tile index): a gather.

    The output has the address stream's shape and stops.

    Parameters
    ----------
    addr : Stream
        A stream of ``Index``.
    tensor : Tensor
        A tensor of role ``"input"`` or ``"inout"``.
    tile : (int, int)
        Tile rows and columns; they must divide the tensor's.
    name : str, optional
    """

    def __init__(self, addr, tensor, tile, *, name=None):
        op = _op_name(type(self), name)
        _check_tensor(op, tensor)
        super().__init__(Node._program_of(addr), [addr], name=name, input_names=["addr"])
        _same_program(self, tensor)
        self.tensor = tensor
        _role(self, tensor, ("input", "inout"), "reads")
        a = self.inputs[0]
        if not isinstance(a.dtype, Index):
            raise self._err(StepTypeError, "addr", f"expects a stream of Index, got {a.dtype!r} "
                            f"{fmt_shape(a.shape)} (tensor {tensor.name} {fmt_shape(tensor.shape)})")
        self.grid = _tile_param(self, tensor, tile)
        self.tile = (tile[0], tile[1])
        self.params = {"tensor": tensor.name, "tile": self.tile}
        self._output(a.shape, self.tile_type)
        self._register()

    def offchip_read_bytes(self):
        # cardinality(output) = cardinality(addr): the output has the address stream's shape
        return norm_dim(sympy.sympify(self.program.cardinality(self.inputs[0])) * self.tile_type.nbytes())


class RandomOffChipStore(_OffChip):
    """Write each data tile to the tile index its paired address names: a scatter.

    Addresses and data are paired element by element (their stop structures may differ; their
    element counts must match at run time). Writes happen in stream order, so a later write to the
    same address wins. The output is a ``Bool`` acknowledgement (``True`` per element) with the
    address stream's shape and stops.

    Parameters
    ----------
    addr : Stream
        A stream of ``Index``.
    data : Stream
        Static-shape tiles of ``tensor``'s dtype that divide the tensor.
    tensor : Tensor
        A tensor of role ``"output"`` or ``"inout"``.
    name : str, optional
    """
    output_names = ("ack",)

    def __init__(self, addr, data, tensor, *, name=None):
        op = _op_name(type(self), name)
        _check_tensor(op, tensor)
        super().__init__(Node._program_of(addr, data), [addr, data], name=name,
                         input_names=["addr", "data"])
        _same_program(self, tensor)
        self.tensor = tensor
        _role(self, tensor, ("output", "inout"), "writes")
        a, d = self.inputs
        if not isinstance(a.dtype, Index):
            raise self._err(StepTypeError, "addr", f"expects a stream of Index, got {a.dtype!r} "
                            f"{fmt_shape(a.shape)} (data {fmt_shape(d.shape)})")
        tile = _static_tile_stream(self, "data", d, tensor)
        self.grid = _tile_param(self, tensor, tile)
        self.tile = tile
        ca, cd = self.program.cardinality(a), self.program.cardinality(d)
        if isinstance(ca, int) and isinstance(cd, int) and ca != cd:
            raise self._err(StepShapeError, "data", f"pairs {cd} data tiles with {ca} addresses: "
                            f"addr {fmt_shape(a.shape)} vs data {fmt_shape(d.shape)}")
        self.params = {"tensor": tensor.name}
        self._output(a.shape, Bool())
        self._register()

    def offchip_write_bytes(self):
        a, d = self.inputs
        card = self.program.cardinality(a)
        if _is_count(self.program, card) and not _is_count(self.program, self.program.cardinality(d)):
            card = self.program.cardinality(d)  # the two counts are equal at run time
        return norm_dim(sympy.sympify(card) * self.tile_type.nbytes())
