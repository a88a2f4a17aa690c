"""The generator's motifs, part 1: sources, compute and shape operators.

A motif is a function of the :class:`~stepforge.fuzz.generator.Generator` that writes one
operator or a few that belong together, reading streams of the pool. It raises
:class:`~stepforge.fuzz.generator.Skip` when the pool has nothing it applies to (the generator
then undoes it and draws another). Routing, on-chip and off-chip memory motifs are in
:mod:`stepforge.fuzz.motifs_route`.
"""

import math
import re

from ..compiler.ops.offchip import affine_range
from .exprs import Term, random_expr
from .generator import Skip, is_buffer, is_tile

__all__ = ["SOURCES", "MOTIFS", "term", "walk", "load", "partner", "fold_fn"]


def term(s, name):
    """The :class:`Term` of parameter ``name`` taking the tiles of stream ``s``."""
    t = s.dtype
    return Term(name, t.dtype.name, t.rows, t.cols)


def static_tile(s):
    return (is_tile(s) and isinstance(s.dtype.rows, int) and isinstance(s.dtype.cols, int)
            and s.dtype.rows > 0 and s.dtype.cols > 0)


def tile_text(dtype, rows, cols):
    return f"Tile({dtype}, {rows}, {cols})"


# -- off-chip walks ------------------------------------------------------------------------

def walk(g, ntiles, *, dims=None, max_tiles=24):
    """A random affine walk over ``ntiles`` tiles: ``(out_shape, stride, offset)``, in range."""
    rng = g.rng
    k = int(rng.integers(1, 4)) if dims is None else dims
    out_shape = []
    for _ in range(k):
        room = max_tiles // max(1, math.prod(out_shape))
        out_shape.append(int(rng.integers(1, max(1, min(4, room)) + 1)))
    for _ in range(30):
        stride = []
        for d in out_shape:
            r = rng.random()
            if r < 0.25:
                stride.append(0)                              # re-read (stride-0 reuse)
            elif r < 0.5:
                stride.append(1)
            elif r < 0.9:
                stride.append(int(rng.integers(0, max(1, ntiles // max(1, d - 1)) + 1)))
            else:
                stride.append(-int(rng.integers(1, 3)))       # backwards
        lo, hi = affine_range(out_shape, stride, 0)
        if hi - lo < ntiles:
            offset = int(rng.integers(-lo, ntiles - hi))
            return tuple(out_shape), tuple(stride), offset
    return tuple(out_shape), (0,) * k, int(rng.integers(0, ntiles))


def load(g, dtype=None, tile=None, *, ref=None, dims=None, max_tiles=24, key=None):
    """A new tensor and a LinearOffChipLoad of it; returns the stream variable."""
    rng = g.rng
    dtype = dtype or g.dtype()
    tr, tc = tile or g.tile_shape()
    gr, gc = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    T = g.tensor((gr * tr, gc * tc), dtype)
    out_shape, stride, offset = walk(g, gr * gc, dims=dims, max_tiles=max_tiles)
    off = f", offset={offset}" if offset else ""
    if ref is None:
        return g.op(f"LinearOffChipLoad({T}, {(tr, tc)}, out_shape={out_shape}, stride={stride}{off})",
                    [T])
    if key is None:
        key = ("refload", g.struct[ref], out_shape)
    return g.op(f"LinearOffChipLoad({T}, {(tr, tc)}, out_shape={out_shape}, stride={stride}{off}, "
                f"ref={ref})", [T, ref], key=key)


def per_element(g, ref, dtype, tile):
    """A load of one tile per element of ``ref``: a stream with ``ref``'s shape and stops."""
    return load(g, dtype, tile, ref=ref, dims=0, key=g.struct[ref])


def partner(g, var, *, dtype=None, tile=None):
    """A tile stream read in lock step with ``var``: an existing one of the same structure, a
    per-element load, or a Map of ``var`` itself (a fan-out that reconverges)."""
    s = g.stream(var)
    want = lambda t: is_tile(t) and (dtype is None or t.dtype.dtype.name == dtype) and (  # noqa: E731
        tile is None or (t.dtype.rows, t.dtype.cols) == tile)
    found = g.lockstep_partners(var, want)
    r = g.rng.random()
    if found and r < 0.4:
        return g.choose(found)
    if r < 0.75 or not static_tile(s) or (tile and tile != (s.dtype.rows, s.dtype.cols)):
        if tile is None:
            tile = (s.dtype.rows, s.dtype.cols) if static_tile(s) and g.rng.random() < 0.7 \
                else g.tile_shape(big=0)
        return per_element(g, var, dtype or g.dtype(), tile)
    e = random_expr(g.rng, [term(s, "a")], allow_cast=dtype is not None)
    if dtype is not None and e.dtype != dtype:
        e = Term(f"cast({dtype})({e.text})", dtype, e.rows, e.cols)
    if (e.rows, e.cols) != (s.dtype.rows, s.dtype.cols):
        raise Skip("the Map changed the tile shape")
    return g.op(f"Map(lambda a: {e.text}, {var})", [var], key=g.struct[var])


# -- sources -------------------------------------------------------------------------------

def src_load(g):
    load(g)


def src_input(g):
    rank = int(g.rng.integers(0, 3))
    tr, tc = g.tile_shape(big=0)
    g.host_input(g.ragged_dims(rank), tile_text(g.dtype(), tr, tc))


def ref_load(g):
    """A load repeated once per element of any stream (a reference-driven walk)."""
    ref = g.pick(lambda s: not is_buffer(s))
    load(g, ref=ref, dims=int(g.rng.integers(0, 3)), max_tiles=6)


# -- compute -------------------------------------------------------------------------------

def map_unary(g):
    x = g.pick(is_tile)
    s = g.stream(x)
    e = random_expr(g.rng, [term(s, "a")])
    g.op(f"Map(lambda a: {e.text}, {x})", [x], key=g.struct[x])


def map_binary(g):
    x = g.pick(is_tile)
    s = g.stream(x)
    y = partner(g, x)
    a, b = term(s, "a"), term(g.stream(y), "b")
    args = [a, b]
    if b.dtype != a.dtype:
        args.append(Term(f"cast({a.dtype})(b)", a.dtype, b.rows, b.cols))
    e = random_expr(g.rng, args, steps=int(g.rng.integers(1, 4)))
    if not re.search(r"\bb\b", e.text):      # use the partner
        e = random_expr(g.rng, args, start=args[-1] if len(args) > 2 else b, steps=1)
    if g.rng.random() < 0.3:
        g.op(f"Map(lambda a, b: {e.text}, Zip({x}, {y}))", [x, y], key=g.struct[x])
    else:
        g.op(f"Map(lambda a, b: {e.text}, {x}, {y})", [x, y], key=g.struct[x])


def map_matmul(g):
    x = g.pick(static_tile)
    s = g.stream(x)
    dt, r, c = s.dtype.dtype.name, s.dtype.rows, s.dtype.cols
    n = int(g.choose([1, 2, 4]))
    if g.rng.random() < 0.5:
        w = partner(g, x, dtype=dt, tile=(c, n))
        fn = "matmul" if g.rng.random() < 0.5 else "lambda a, b: a @ b"
    else:
        w = partner(g, x, dtype=dt, tile=(n, c))
        fn = "lambda a, b: a @ b.T"
    g.op(f"Map({fn}, {x}, {w})", [x, w], key=g.struct[x])


def fold_fn(g, s, *, allow_cast=True):
    """``(fn text, init text)`` for an Accum/Scan over tiles of ``s``."""
    a = term(s, "a")
    e = random_expr(g.rng, [a], steps=int(g.rng.integers(0, 3)), allow_cast=allow_cast)
    acc = tile_text(e.dtype, e.rows, e.cols)
    combine = g.choose(["acc + {e}", "acc - {e}", "maximum(acc, {e})", "(acc * 3) + {e}"])
    init = g.choose([acc, f"zeros({acc})", f"full({acc}, {int(g.rng.integers(-3, 4))})"])
    if e.text == "a" and g.rng.random() < 0.3:
        init = str(int(g.rng.integers(-3, 4)))     # a number fills the element type
    return f"lambda acc, a: {combine.format(e=e.text)}", init


def accum(g):
    x = g.pick(lambda s: static_tile(s) and s.rank >= 1)
    s = g.stream(x)
    b = int(g.rng.integers(1, s.rank + 1))
    if g.rng.random() < 0.3:          # a K-reduction: acc + a @ w, or mac over a Zip
        dt, r, c = s.dtype.dtype.name, s.dtype.rows, s.dtype.cols
        n = int(g.choose([1, 2, 4]))
        w = partner(g, x, dtype=dt, tile=(c, n))
        acc = tile_text("int32", r, n)
        if g.rng.random() < 0.5:
            g.op(f"Accum(lambda acc, a, w: acc + a @ w, {acc}, {x}, {w}, b={b})", [x, w],
                 key=("accum", g.struct[x], b))
        else:
            g.op(f"Accum(mac(), zeros({acc}), Zip({x}, {w}), b={b})", [x, w],
                 key=("accum", g.struct[x], b))
        return
    fn, init = fold_fn(g, s)
    g.op(f"Accum({fn}, {init}, {x}, b={b})", [x], key=("accum", g.struct[x], b))


def scan(g):
    x = g.pick(static_tile)
    s = g.stream(x)
    b = int(g.rng.integers(1, s.rank + 2))
    fn, init = fold_fn(g, s)
    g.op(f"Scan({fn}, {init}, {x}, b={b})", [x], key=g.struct[x])


# -- shape ---------------------------------------------------------------------------------

def not_buffer(s):
    return not is_buffer(s)


def promote(g):
    x = g.pick(not_buffer)
    s = g.stream(x)
    b = int(g.rng.integers(0, s.rank + 2))
    arg = "" if b == s.rank + 1 and g.rng.random() < 0.5 else f", {b}"
    g.op(f"Promote({x}{arg})", [x], key=("promote", g.struct[x], b))


def flatten(g):
    x = g.pick(lambda s: not_buffer(s) and s.rank >= 1)
    s = g.stream(x)
    lo = int(g.rng.integers(0, s.rank))
    hi = int(g.rng.integers(lo + 1, s.rank + 1))
    g.op(f"Flatten({x}, {lo}, {hi})", [x], key=("flatten", g.struct[x], lo, hi))


def reshape(g):
    x = g.pick(lambda s: not_buffer(s))
    s = g.stream(x)
    n = len(s.shape)
    options = []
    for b in range(0, s.rank + 1):
        d = s.shape[n - 1 - b]
        for chunk in (1, 2, 3):
            if b > 0 and not (isinstance(d, int) and d % chunk == 0):
                continue
            options.append((b, chunk))
    b, chunk = g.choose(options)
    d0 = s.shape[-1]
    needs_pad = b == 0 and chunk > 1 and not (isinstance(d0, int) and d0 % chunk == 0)
    pad = ""
    if b == 0 and is_tile(s) and (needs_pad or g.rng.random() < 0.3):
        pad = f", pad={int(g.rng.integers(-2, 3))}"
    elif needs_pad:
        raise Skip("a partial chunk of non-tiles cannot be padded")
    flags = b == 0 and pad and g.rng.random() < 0.5
    key = ("reshape", g.struct[x], b, chunk)
    if not flags:
        g.op(f"Reshape({x}, {chunk}, {b}{pad})", [x], key=key)
        return
    y, f = g.ops(f"Reshape({x}, {chunk}, {b}{pad}, flags=True)", 2, [x], [key, key])
    if g.rng.random() < 0.6:      # drop (or keep only) the padding
        keep = g.rng.random() < 0.25
        g.op(f"Filter({y}, {f}, keep={keep})", [y, f], key=("filter", key, keep))


def repeat(g):
    x = g.pick(not_buffer)
    n = int(g.rng.integers(1, 4))
    g.op(f"RepeatStatic({x}, {n})", [x], key=("repeat", g.struct[x], n))


def expand(g):
    """Expand a per-fibre fold back over the fibre: ``Expand(Promote(Accum(x, k), 0)..., x, k)``."""
    x = g.pick(lambda s: static_tile(s) and s.rank >= 1)
    s = g.stream(x)
    k = int(g.rng.integers(1, s.rank + 1))
    fn, init = fold_fn(g, s)
    d = g.op(f"Accum({fn}, {init}, {x}, b={k})", [x], key=("accum", g.struct[x], k))
    for _ in range(k):
        d = g.op(f"Promote({d}, 0)", [d], key=("promote", g.struct[d], 0), pool=False)
    ref = x
    g.op(f"Expand({d}, {ref}, {k})", [d, ref], key=g.struct[x])


def zip_(g):
    x = g.pick(is_tile)
    y = partner(g, x)
    z = g.op(f"Zip({x}, {y})", [x, y], key=g.struct[x])
    r = g.rng.random()
    if r < 0.4:
        sx, sy = g.stream(x), g.stream(y)
        a, b = term(sx, "a"), term(sy, "b")
        args = [a, b] + ([Term(f"cast({a.dtype})(b)", a.dtype, b.rows, b.cols)]
                         if b.dtype != a.dtype else [])
        e = random_expr(g.rng, args)
        g.op(f"Map(lambda a, b: {e.text}, {z})", [z], key=g.struct[x])


SOURCES = [(src_load, 3), (src_input, 1.5)]

MOTIFS = [(map_unary, 3), (map_binary, 2), (map_matmul, 1.5), (accum, 2.5), (scan, 1.5),
          (promote, 1), (flatten, 1), (reshape, 1.5), (repeat, 1), (expand, 1), (zip_, 1),
          (ref_load, 1)]
