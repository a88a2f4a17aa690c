"""Hierarchical tiling: STeP tiles larger than the hardware tile become streams of hardware tiles.

A STeP program may move tiles of any static shape; the hardware moves one ``tile_rows x
tile_cols`` tile per beat (:class:`~stepforge.hdl.config.HardwareConfig`). :func:`tile_for_hardware`
rewrites a program whose tiles are larger into an equivalent program over hardware tiles, the
paper's *hierarchical tiling* (notes section 3.3): a STeP tile ``[R, C]`` becomes ``a x c``
hardware tiles ``[R/a, C/c]``, and every stream of such tiles gains two inner dimensions, the
*sub-tile* row ``r`` (size ``a``) and column ``c`` (size ``c``).

Where those two dimensions go in a stream is its *view*: a tuple over the old stream's
dimensions (ints, outermost first, always all of them and in order) with the sub-tile row
``"r"`` and column ``"c"`` inserted, and possibly broadcast dimensions ``("b", n)`` (the same
data ``n`` times). ``(0, 1, ..., "r", "c")`` is the *canonical* view: each STeP tile's hardware
tiles in row-major order, one after the other. The pass pulls views from the sinks:

* a **LinearOffChipStore** writes its stream in the tensor's row-major tile order, so it asks
  for ``"r"`` just above the dimensions that walk one row of STeP tiles and ``"c"`` innermost;
* an **elementwise Map** (every primitive elementwise) asks its inputs for its own view;
* a **matmul** (``Map(a @ w)``, or the ``Accum`` of ``acc + a @ w`` / ``mac``) asks for the
  output tile's sub-tile dimensions in place, the reduced dimensions after them and the
  sub-tiles of the shared ``k`` innermost: ``a``'s view broadcasts over the output's sub-tile
  columns, ``w``'s over its sub-tile rows, and the hardware Accum reduces ``b + 1`` levels
  (``Map(a @ w)`` becomes an ``Accum`` over the ``k`` sub-tiles);
* an **elementwise Accum** puts the reduced dimensions inside the sub-tile dimensions, so one
  hardware accumulator tile suffices;
* a **Zip** passes its view on to every input;
* the **affine sources** answer any view by rewriting their walk: a **LinearOffChipLoad**
  gets a walk over hardware tiles (strides from the STeP tile grid to the hardware grid), a
  **Streamify** of a **Bufferize** an affine replay ``order`` over the buffer of hardware tiles
  (the Bufferize buffers the canonical view, ``b + 2`` levels).

A stream asked for two different views is built twice (for a load: read twice; the metrics of
the rewritten program count it). Integer results are bit-exact with the STeP program (wrapping
sums re-associate exactly); float matmuls sum their ``k`` terms in sub-tile order, as any blocked
matmul does. An operator without a rule here raises :class:`TilingError` naming it.
"""

from . import functions as F
from .dims import fmt_shape
from .errors import LoweringError
from .graph import Program
from .ops.compute import Accum, Map
from .ops.memory import Bufferize, Streamify
from .ops.offchip import LinearOffChipLoad, LinearOffChipStore
from .ops.shape import Zip
from .types import Buffer, Tile, Tuple

__all__ = ["TilingError", "tile_for_hardware", "needs_tiling", "subtile", "element_tiles"]

_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "maximum", "exp", "silu", "rsqrt", "cast",
                          "scale", "arg", "const", "get"})


class TilingError(LoweringError):
    """The program has a STeP tile larger than the hardware tile where no rule applies."""


def element_tiles(t):
    """The tiles an element type ``t`` holds (itself, a tuple's, a buffer's element's)."""
    if isinstance(t, Tile):
        return [t]
    if isinstance(t, Tuple):
        return [x for e in t.elems for x in element_tiles(e)]
    if isinstance(t, Buffer):
        return element_tiles(t.elem)
    return []


def _too_big(tile, config):
    return all(isinstance(d, int) for d in (tile.rows, tile.cols)) and (
        tile.rows > config.tile_rows or tile.cols > config.tile_cols)


def needs_tiling(program, config):
    """Whether any stream of ``program`` moves a static tile larger than ``config``'s."""
    return any(_too_big(t, config) for s in program.streams for t in element_tiles(s.dtype))


def subtile(tile, config, where=""):
    """``(hardware tile, a, c)``: ``tile`` as ``a x c`` hardware tiles.

    A side no larger than the hardware tile's is kept (``a`` or ``c`` is 1); a larger side must be
    a multiple of the hardware tile's.
    """
    if not isinstance(tile, Tile) or not all(isinstance(d, int) for d in (tile.rows, tile.cols)):
        raise TilingError(f"{where}: hierarchical tiling needs static tiles, got {tile!r}")
    sides = []
    for side, hw, what in ((tile.rows, config.tile_rows, "rows"), (tile.cols, config.tile_cols, "cols")):
        if side <= hw:
            sides.append((side, 1))
        elif side % hw:
            raise TilingError(f"{where}: tile {fmt_shape(tile.shape)} has {side} {what}, not a "
                              f"multiple of the hardware tile's {hw} "
                              f"({config.tile_rows}x{config.tile_cols})")
        else:
            sides.append((hw, side // hw))
    (hr, a), (hc, c) = sides
    return Tile(tile.dtype, hr, hc), a, c


def tile_for_hardware(program, config):
    """``program`` over hardware tiles: a new Program, or ``program`` itself if every tile fits.

    Raises
    ------
    TilingError
        An operator moves a tile larger than the hardware tile and has no rule, a walk that
        cannot be split (a load whose walk wraps around the tensor's columns), or tiles whose
        sides are not multiples of the hardware tile's.
    """
    if not needs_tiling(program, config):
        return program
    return _Tiler(program, config).run()


def canonical(n):
    """The canonical view of a stream with ``n`` dimensions."""
    return tuple(range(n)) + ("r", "c")


def _size(item, a, c, shape):
    if item == "r":
        return a
    if item == "c":
        return c
    if isinstance(item, tuple):
        return item[1]
    return shape[item]


class _Tiler:
    def __init__(self, program, config):
        self.old = program
        self.config = config
        self.new = Program(program.name)
        self.new.symbols = program.symbols
        for name, t in program.tensors.items():
            self.new.tensor(name, t.shape, t.dtype, role=t.role)
        self.memo = {}
        self.names = {}

    # -- driver ----------------------------------------------------------------------------------

    def run(self):
        consumers = self.old.consumers()
        for node in self.old.nodes:
            if isinstance(node, LinearOffChipStore):
                self._store(node)
            elif not node.outputs:
                self._fail(node, "is a sink without a hierarchical tiling rule")
            for s in node.outputs:
                if not consumers[s]:
                    self.emit(s, canonical(len(s.shape)))
        return self.new

    def _fail(self, node, what):
        tiles = sorted({fmt_shape(t.shape) for s in list(node.inputs) + list(node.outputs)
                        for t in element_tiles(s.dtype)})
        c = self.config
        raise TilingError(f"{node.name} ({type(node).__name__}) {what} (tiles {', '.join(tiles)} "
                          f"on a {c.tile_rows}x{c.tile_cols} hardware tile)")

    def _name(self, node):
        k = self.names.get(node.name, 0)
        self.names[node.name] = k + 1
        return node.name if k == 0 else f"{node.name}_v{k}"

    def _check_view(self, s, view):
        n = len(s.shape)
        dims = [i for i in view if isinstance(i, int)]
        if dims != list(range(n)):
            raise AssertionError(f"view {view} of {s!r} does not keep its dimensions in order")
        if not all(isinstance(d, int) for d in s.shape):
            self._fail(s.node, f"has a dynamic stream shape {fmt_shape(s.shape)}")

    def emit(self, s, view):
        """The new stream that carries old stream ``s`` in ``view``."""
        key = (s, view)
        if key not in self.memo:
            self._check_view(s, view)
            self.memo[key] = self._rule(s.node)(s, view)
        return self.memo[key]

    def _rule(self, node):
        rules = {LinearOffChipLoad: self._load, Streamify: self._streamify, Map: self._map,
                 Accum: self._accum, Zip: self._zip}
        rule = rules.get(type(node))
        if rule is None:
            self._fail(node, "has no hierarchical tiling rule")
        return rule

    def _sub(self, s):
        return subtile(s.dtype, self.config, f"{s.node.name}")

    # -- sinks -----------------------------------------------------------------------------------

    def _store(self, node):
        x = node.inputs[0]
        self._check_view(x, tuple(range(len(x.shape))))
        _, a, c = self._sub(x)
        grid_cols = node.grid[1]
        # the innermost dimensions that walk one row of STeP tiles, so that "r" can go above them
        prod, j = 1, len(x.shape)
        while prod < grid_cols and j > 0:
            j -= 1
            prod *= x.shape[j]
        if prod != grid_cols:
            self._fail(node, f"stores a stream {fmt_shape(x.shape)} whose inner dimensions do not "
                             f"walk whole rows of {grid_cols} tiles of {node.tensor.name}")
        view = tuple(range(j)) + ("r",) + tuple(range(j, len(x.shape))) + ("c",)
        LinearOffChipStore(self.emit(x, view), self.new.tensors[node.tensor.name], name=node.name)

    # -- affine sources ----------------------------------------------------------------------------

    def _load(self, s, view):
        """A load in ``view``. Broadcast dimensions are not re-read from memory: the load walks
        the view without them, a PMU buffers what lies inside the outermost broadcast and
        replays it (the paper's on-chip STeP tile), so off-chip traffic stays the STeP
        program's."""
        name = self._name(s.node)
        first = next((k for k, item in enumerate(view) if _is_broadcast(item)), None)
        if first is None:
            return self._walk_load(s, view, name)
        _, a, c = self._sub(s)
        inner = view[first:]
        sizes = [_size(item, a, c, s.shape) for item in inner]
        strides, step = [0] * len(inner), 1      # row-major over the buffered (non-broadcast) items
        for k in reversed(range(len(inner))):
            if not _is_broadcast(inner[k]):
                strides[k] = step
                step *= sizes[k]
        data = tuple(item for item in inner if not _is_broadcast(item))
        loaded = self._walk_load(s, view[:first] + data, name)
        buffers = Bufferize(loaded, len(data), name=f"{name}_buffer").outputs[0]
        order = (tuple(sizes), tuple(strides), 0)
        return Streamify(buffers, order=order, name=f"{name}_replay").outputs[0]

    def _walk_load(self, s, view, name):
        """A load whose walk is ``view`` (no broadcast dimensions: each tile read once)."""
        node = s.node
        if node.ref is not None:
            self._fail(node, "reads with a reference stream (no hierarchical tiling rule)")
        if view[0] != 0:
            self._fail(node, "would need a dimension outside its walk")
        hw, a, c = self._sub(s)
        gc = node.grid[1]
        hw_cols = gc * c

        def split(linear):
            q, r = divmod(linear, gc)
            return q * a * hw_cols + r * c, r

        offset, col0 = split(node.offset)
        shape, stride, col_reach = [], [], col0
        for item in view[1:]:
            if item == "r":
                shape.append(a), stride.append(hw_cols)
            elif item == "c":
                shape.append(c), stride.append(1)
            elif isinstance(item, tuple):     # a broadcast of one: a dimension of size 1
                shape.append(1), stride.append(0)
            else:
                n = node.out_shape[item - 1]
                st, col_step = split(node.stride[item - 1])
                col_reach += (n - 1) * col_step
                shape.append(n), stride.append(st)
        if col_reach >= gc:
            self._fail(node, f"walks {node.out_shape} with strides {node.stride} across the rows "
                             f"of {node.tensor.name}'s {node.grid[0]}x{gc} tile grid; its columns "
                             f"cannot be split into hardware tiles")
        return LinearOffChipLoad(self.new.tensors[node.tensor.name], (hw.rows, hw.cols),
                                 out_shape=tuple(shape), stride=tuple(stride), offset=offset,
                                 name=name).outputs[0]

    def _streamify(self, s, view):
        node = s.node
        if node.ref is not None:
            self._fail(node, "replays by a reference stream (no hierarchical tiling rule)")
        bz = node.inputs[0].node
        if not isinstance(bz, Bufferize):
            self._fail(node, f"replays buffers from {bz.name}, not from a Bufferize")
        shape = node.buffer.shape
        if not all(isinstance(d, int) for d in shape):
            self._fail(node, f"replays a dynamic buffer {fmt_shape(shape)}")
        rowmajor = [1] * len(shape)
        for i in reversed(range(len(shape) - 1)):
            rowmajor[i] = rowmajor[i + 1] * shape[i + 1]
        if node.order is not None:
            walk, strides, offset = node.order
        elif node.repeat is not None:
            walk, strides, offset = (node.repeat, *shape), (0, *rowmajor), 0
        else:
            walk, strides, offset = shape, rowmajor, 0
        nb = len(node.inputs[0].shape)
        if tuple(view[:nb]) != tuple(range(nb)):
            self._fail(node, "would need a dimension among its buffers' dimensions")
        _, a, c = self._sub(s)
        out_shape, out_stride = [], []
        for item in view[nb:]:
            if item == "r":
                out_shape.append(a), out_stride.append(c)
            elif item == "c":
                out_shape.append(c), out_stride.append(1)
            elif isinstance(item, tuple):
                out_shape.append(item[1]), out_stride.append(0)
            else:
                out_shape.append(walk[item - nb]), out_stride.append(strides[item - nb] * a * c)
        key = ("bufferize", bz)
        if key not in self.memo:
            x = bz.inputs[0]
            self.memo[key] = Bufferize(self.emit(x, canonical(len(x.shape))), bz.b + 2,
                                       name=self._name(bz)).outputs[0]
        return Streamify(self.memo[key], order=(tuple(out_shape), tuple(out_stride), offset * a * c),
                         name=self._name(node)).outputs[0]

    # -- compute ---------------------------------------------------------------------------------

    def _zip(self, s, view):
        return Zip(*[self.emit(x, view) for x in s.node.inputs], name=self._name(s.node)).outputs[0]

    def _input_view(self, view, x, out_a, out_c, inner=()):
        """``view`` of an output for input ``x`` (same outer dimensions), ``inner`` appended; a
        side of one sub-tile is broadcast where the output has several."""
        _, a, c = self._sub(x)
        items = []
        for item in view:
            if item == "r" and a != out_a:
                if a != 1:
                    self._fail(x.node, f"feeds a tile {fmt_shape(x.dtype.shape)} that neither "
                                       f"matches nor broadcasts over the output's rows")
                item = ("b", out_a)
            elif item == "c" and c != out_c:
                if c != 1:
                    self._fail(x.node, f"feeds a tile {fmt_shape(x.dtype.shape)} that neither "
                                       f"matches nor broadcasts over the output's columns")
                item = ("b", out_c)
            items.append(item)
        return tuple(items) + tuple(inner)

    def _matmul_operands(self, node, body, first):
        """``(i, j)``: the parameters that ``a`` and ``w`` of ``a @ w`` depend on (params from
        ``first``), or None when ``body`` is not such a matmul."""
        if body.op != "matmul" or body.attrs.get("transpose_b"):
            return None
        deps = []
        for operand in body.args:
            args = set()
            for e in _walk(operand):
                if e.op not in _ELEMENTWISE:
                    return None
                if e.op == "arg":
                    args.add(e.attrs["index"])
            if len(args) != 1 or min(args) < first:
                return None
            deps.append(args.pop())
        return tuple(deps) if deps[0] != deps[1] else None

    def _matmul_inputs(self, node, s, view, mm, reduced):
        """The two inputs of a matmul (``a`` is input ``mm[0]``, ``w`` input ``mm[1]``) in the
        views that make output ``s`` come out in ``view``, in input order."""
        i, j = mm
        x, w = node.inputs[i], node.inputs[j]
        xt, _, ak = self._sub(x)
        wt, ak_w, _ = self._sub(w)
        if (xt.cols, ak) != (wt.rows, ak_w):
            self._fail(node, f"multiplies tiles {fmt_shape(x.dtype.shape)} @ "
                             f"{fmt_shape(w.dtype.shape)} whose shared side splits differently")
        _, am, an = self._sub(s)
        xv = tuple(("b", an) if it == "c" else it for it in view)
        wv = tuple(("b", am) if it == "r" else it for it in view)
        xv = self._input_view(xv, x, am, an, (*reduced, "c"))
        wv = self._input_view(wv, w, am, an, (*reduced, "r"))
        ins = [None, None]
        ins[i], ins[j] = self.emit(x, xv), self.emit(w, wv)
        return ins

    def _map(self, s, view):
        node = s.node
        body = node.fn.body
        if all(e.op in _ELEMENTWISE for e in node.fn.expressions()):
            _, a, c = self._sub(s)
            ins = [self.emit(x, self._input_view(view, x, a, c)) for x in node.inputs]
            return Map(node.fn, *ins, name=self._name(node)).outputs[0]
        mm = self._matmul_operands(node, body, 0) if len(node.inputs) == node.fn.arity else None
        if mm is None or len(node.inputs) != 2:
            self._fail(node, f"applies {node.fn!r}: only elementwise functions and a @ w have a "
                             f"hierarchical tiling rule")
        ins = self._matmul_inputs(node, s, view, mm, ())
        fn = node.fn
        acc = F.function(lambda acc, p0, p1: acc + fn(p0, p1), name=f"acc_{fn.name}")
        hw, _, _ = self._sub(s)
        return Accum(acc, F.zeros(hw), *ins, b=1, name=self._name(node)).outputs[0]

    def _accum(self, s, view):
        node = s.node
        init = node.init
        if isinstance(init.type, Tuple) or node.fn.accum is not None:
            self._fail(node, f"accumulates {init!r} with {node.fn!r} (no hierarchical tiling rule "
                             f"for tuple or retiling accumulators)")
        if len(node.inputs) != node.fn.arity - 1:
            self._fail(node, "reads a zipped tuple stream; give the Accum its streams separately")
        x0 = node.inputs[0]
        reduced = tuple(range(len(s.shape), len(x0.shape)))
        hw, a, c = self._sub(s)
        new_init = F.full(hw, init.fill)
        body = node.fn.body
        if all(e.op in _ELEMENTWISE for e in node.fn.expressions()):
            ins = [self.emit(x, self._input_view(view, x, a, c, reduced)) for x in node.inputs]
            return Accum(node.fn, new_init, *ins, b=node.b, name=self._name(node)).outputs[0]
        mm = None
        if body.op == "add" and len(body.args) == 2:
            for acc_side, other in ((0, 1), (1, 0)):
                e = body.args[acc_side]
                if e.op == "arg" and e.attrs["index"] == 0:
                    mm = self._matmul_operands(node, body.args[other], 1)
        elif body.op == "mac" and not body.attrs.get("transpose_b"):
            acc_e, xe, we = body.args
            if acc_e.op == "arg" and acc_e.attrs["index"] == 0 and xe.op == we.op == "arg":
                mm = (xe.attrs["index"], we.attrs["index"])
        if mm is None:
            self._fail(node, f"accumulates with {node.fn!r}: only elementwise functions and "
                             f"acc + a @ w have a hierarchical tiling rule")
        if len(node.inputs) != 2:
            self._fail(node, "multiplies more than two streams")
        mm = (mm[0] - 1, mm[1] - 1)     # parameter k + 1 reads input k
        ins = self._matmul_inputs(node, s, view, mm, reduced)
        return Accum(node.fn, new_init, *ins, b=node.b + 1, name=self._name(node)).outputs[0]


def _is_broadcast(item):
    """A broadcast dimension of more than one (a broadcast of one is a dimension of size 1)."""
    return isinstance(item, tuple) and item[1] > 1


def _walk(expr):
    stack, seen = [expr], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(e.args)
