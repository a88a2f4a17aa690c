"""The generator's motifs, part 2: on-chip memory, routing, FlatMaps and off-chip stores.

Data-dependent routing needs a selector whose structure matches the data's. A motif either
draws a host selector with the static shape of the data's outer dimensions, or draws a ragged
host selector first and makes the data from it (a load repeated once per selector element), so
that the stops agree by construction. EagerMerge's order depends on timing in hardware, so its
results are always routed back by its own selector (a Partition recovers each input's chunks in
order) or folded by a commutative sum; they are never compared in arrival order.
"""

import math

from ..compiler.types import Select
from .generator import Skip, is_buffer, is_tile
from .motifs import load, per_element, static_tile, term, tile_text, walk
from .exprs import random_expr

__all__ = ["MOTIFS", "finish"]


def not_buffer(s):
    return not is_buffer(s)


def small_static(g, dims, limit):
    return all(isinstance(d, int) for d in dims) and math.prod(dims) <= limit


# -- on-chip memory -------------------------------------------------------------------------

def _buffer_size_ok(g, s, b):
    inner = s.shape[len(s.shape) - b:]
    total = 1
    for d in inner:
        bound = g.bound(d)
        if bound is None:
            return False
        total *= max(bound, 1)
    return total <= 24


def buffer(g):
    """Bufferize and one or two Streamify readers: plain, repeated, in an affine order, or
    replayed once per reference element."""
    x = g.pick(lambda s: not_buffer(s) and s.rank >= 1)
    s = g.stream(x)
    b = int(g.rng.integers(1, s.rank + 1))
    if not _buffer_size_ok(g, s, b):
        raise Skip("buffer too large")
    if static_tile(s) and g.rng.random() < 0.3:
        _buffer_with_ref(g, x, b)
        return
    buf = g.fresh("buf")
    g.emit(f"{buf} = Bufferize({x}, {b})", [(buf, "buffer")], [x])
    inner = s.shape[len(s.shape) - b:]
    readers = 2 if g.rng.random() < 0.25 else 1
    for _ in range(readers):
        form = g.rng.random()
        if form < 0.35:
            g.op(f"Streamify({buf})", [buf], key=g.struct[x])
        elif form < 0.7 or g.struct[x][0] != "static":   # an order needs full buffers
            n = int(g.rng.integers(1, 4))
            g.op(f"Streamify({buf}, repeat={n})", [buf], key=("replay", g.struct[x], b, n))
        else:
            size = math.prod(inner)
            out_shape, stride, offset = walk(g, size, dims=int(g.rng.integers(1, 3)), max_tiles=12)
            order = (out_shape, stride, offset) if offset else (out_shape, stride)
            g.op(f"Streamify({buf}, order={order})", [buf], key=("order", g.struct[x], b, order))


def _buffer_with_ref(g, x, b):
    s = g.stream(x)
    acc = g.op(f"Accum(lambda acc, a: acc + a, {tile_text(s.dtype.dtype.name, s.dtype.rows, s.dtype.cols)}, "
               f"{x}, b={b})", [x], key=("accum", g.struct[x], b))
    m = int(g.rng.integers(1, 4))
    if g.rng.random() < 0.5:
        ref = g.op(f"RepeatStatic({acc}, {m})", [acc], key=("repeat", g.struct[acc], m))
    else:
        ref = load(g, ref=acc, dims=1, max_tiles=3)
    up = g.op(f"Promote({x}, {b})", [x], key=("promote", g.struct[x], b), pool=False)
    buf = g.fresh("buf")
    g.emit(f"{buf} = Bufferize({up}, {b})", [(buf, "buffer")], [up])
    g.op(f"Streamify({buf}, ref={ref}, expand_rank=1)", [buf, ref], key=("refreplay", g.struct[ref]))


# -- routing --------------------------------------------------------------------------------

def _selector_hint(g, n):
    r = g.rng.random()
    if r < 0.25:
        return {"onehot": True}
    if r < 0.4:
        return {"nonempty": True}
    return {}


def _routed_data(g):
    """``(data, selector, b)``: a ragged host selector and data loaded once per selector element,
    or a host selector shaped like an existing stream's static outer dimensions."""
    n = int(g.rng.integers(2, 4))
    hint = _selector_hint(g, n)
    if g.rng.random() < 0.5:
        dims = g.ragged_dims(int(g.rng.integers(0, 2)))
        sel = g.host_input(dims, f"Select({n})", hint, prefix="sel")
        b = int(g.rng.integers(0, 2))
        x = load(g, ref=sel, dims=b, max_tiles=3)
        return x, sel, b, n
    cands = []
    for v in g.pool:
        s = g.stream(v)
        if is_buffer(s) or isinstance(s.dtype, Select):
            continue
        for b in range(0, s.rank + 1):
            if small_static(g, s.shape[:len(s.shape) - b], 12):
                cands.append((v, b))
    if not cands:
        raise Skip("no stream with static outer dimensions")
    x, b = g.choose(cands)
    s = g.stream(x)
    sel = g.host_input(list(s.shape[:len(s.shape) - b]), f"Select({n})", hint, prefix="sel")
    return x, sel, b, n


def route(g):
    """Partition, work on some outputs, then Reassemble, EagerMerge or leave them."""
    x, sel, b, n = _routed_data(g)
    key = ("part", g.struct[x], g.struct[sel], b)
    outs = g.ops(f"Partition({x}, {sel}, {n}, {b})", n, [x, sel],
                 [key + (i,) for i in range(n)])
    outs = [_maybe_map(g, o) for o in outs]
    end = g.rng.random()
    if end < 0.45:
        hint = g.hints.get(sel, {})
        count = ""
        if hint.get("onehot") and g.rng.random() < 0.5:
            count = ", count=1"
        g.op(f"Reassemble([{', '.join(outs)}], {sel}, {b}{count})", outs + [sel],
             key=("reassemble", g.struct[sel], b))
    elif end < 0.75:
        _merge_and_recover(g, outs, b)


def _maybe_map(g, var):
    s = g.stream(var)
    if is_tile(s) and g.rng.random() < 0.4:
        e = random_expr(g.rng, [term(s, "a")], allow_cast=False)
        if (e.rows, e.cols) == (s.dtype.rows, s.dtype.cols):
            return g.op(f"Map(lambda a: {e.text}, {var})", [var], key=g.struct[var])
    return var


def _merge_and_recover(g, outs, b):
    """EagerMerge, then an order-independent result: route the chunks back by the merge's own
    selector, or sum everything."""
    n = len(outs)
    keys = tuple(g.struct[o] for o in outs)
    data, sel = g.ops(f"EagerMerge([{', '.join(outs)}], {b})", 2, outs,
                      [("merge", keys, "data"), ("merge", keys, "select")], pool=False)
    s = g.stream(data)
    if static_tile(s) and g.rng.random() < 0.3:
        g.drain(sel)           # the arrival order is timing: only the sum is compared
        up = g.op(f"Promote({data})", [data], pool=False)
        return [g.op(f"Accum(lambda acc, a: acc + a, "
                     f"{tile_text(s.dtype.dtype.name, s.dtype.rows, s.dtype.cols)}, {up}, b={b + 1})",
                     [up])]
    return g.ops(f"Partition({data}, {sel}, {n}, {b})", n, [data, sel],
                 [("recovered", g.struct[o]) for o in outs])


def parallelize(g):
    x = g.pick(not_buffer)
    s = g.stream(x)
    b = int(g.rng.integers(0, s.rank + 1))
    above = s.shape[:len(s.shape) - b]
    n = int(g.rng.integers(2, 4))
    if all(isinstance(d, int) for d in above) and math.prod(above) % n:
        n = next((k for k in (2, 3) if math.prod(above) % k == 0), 1)
        if n == 1:
            raise Skip("chunks not a multiple of the outputs")
    outs = g.ops(f"Parallelize({x}, {n}, {b})", n, [x],
                 [("par", g.struct[x], n, b, i) for i in range(n)])
    if g.rng.random() < 0.5:
        _merge_and_recover(g, [_maybe_map(g, o) for o in outs], b)


def merge(g):
    """EagerMerge of independent streams with one element type and inner shape."""
    x = g.pick(lambda s: not_buffer(s) and not isinstance(s.dtype, Select))
    s = g.stream(x)
    others = [v for v in g.pool if v != x and g.stream(v).rank == s.rank
              and g.stream(v).dtype == s.dtype and g.same_shape_inner(g.stream(v), s)]
    if not others:
        y = load(g, s.dtype.dtype.name, (s.dtype.rows, s.dtype.cols), dims=s.rank) \
            if static_tile(s) and s.rank >= 1 else None
        if y is None or not g.same_shape_inner(g.stream(y), s):
            raise Skip("no stream to merge with")
        others = [y]
    _merge_and_recover(g, [x, g.choose(others)], s.rank)


# -- FlatMaps -------------------------------------------------------------------------------

def retile(g):
    """RetileStreamify of tiles, or dynamic tiling: pack rows into one tile (Accum retile_row),
    compute on the packed tile, unpack it."""
    if g.rng.random() < 0.4:
        x = g.pick(lambda s: static_tile(s) and (s.dtype.rows > 1 or s.dtype.cols > 1))
        s = g.stream(x)
        split = "row" if s.dtype.rows > 1 and (s.dtype.cols == 1 or g.rng.random() < 0.5) else "col"
        b = int(g.rng.integers(0, 2))
        valid = ""
        if g.static(s) and small_static(g, s.shape, 24) and g.rng.random() < 0.4:
            pieces = s.dtype.rows if split == "row" else s.dtype.cols   # drop the padded ones
            v = g.host_input(list(s.shape), "Index()", {"below": pieces + 1}, prefix="v")
            valid = f", valid={v}"
        g.op(f"RetileStreamify({x}, {split!r}{valid}{', b=1' if b else ''})",
             [x] + ([v] if valid else []), key=("retile", g.struct[x], split, b, valid))
        return
    split = "row" if g.rng.random() < 0.7 else "col"
    want = (lambda s: static_tile(s) and s.dtype.rows == 1) if split == "row" else \
        (lambda s: static_tile(s) and s.dtype.cols == 1)
    # a fold over a static size must see full fibres: an empty tensor would give it an empty
    # fibre whose init (an empty tile) does not have the static size; a ragged fibre packs into
    # dynamic rows only (retile_col over it would give dynamic columns, which have no wire
    # encoding: the lowering refuses them, seed 21027)
    x = g.pick(lambda s: want(s) and (g.static(s) or (split == "row"
                                                      and not isinstance(s.shape[-1], int))))
    s = g.stream(x)
    if s.rank == 0 or g.rng.random() < 0.3:
        x = g.op(f"Promote({x})", [x], key=("promote", g.struct[x], None))
        s = g.stream(x)
    fn = "retile_row" if split == "row" else "retile_col"
    packed = g.op(f"Accum({fn}, None, {x}, b=1)", [x], key=("accum", g.struct[x], 1))
    p = g.stream(packed)
    if g.rng.random() < 0.6:
        if split == "row" and g.rng.random() < 0.5:
            n = int(g.choose([1, 2, 4]))
            w = per_element(g, packed, p.dtype.dtype.name, (p.dtype.cols, n))
            packed = g.op(f"Map(matmul, {packed}, {w})", [packed, w], key=g.struct[packed])
        else:
            e = random_expr(g.rng, [term(p, "a")], allow_cast=False,
                            static_rows=isinstance(p.dtype.rows, int))
            if (e.rows, e.cols) == (p.dtype.rows, p.dtype.cols):
                packed = g.op(f"Map(lambda a: {e.text}, {packed})", [packed], key=g.struct[packed])
    g.op(f"RetileStreamify({packed}, {split!r})", [packed], key=("retile", g.struct[packed], split))


def filter_(g):
    x = g.pick(lambda s: not_buffer(s) and small_static(g, s.shape, 48))
    s = g.stream(x)
    f = g.host_input(list(s.shape), "Bool()", prefix="f")
    keep = bool(g.rng.random() < 0.5)
    g.op(f"Filter({x}, {f}, keep={keep})", [x, f], key=("filter", g.struct[x], f))


# -- off-chip addresses and stores ------------------------------------------------------------

def gather(g):
    """RandomOffChipLoad at host addresses, directly or through an AddrGen (with a host count
    per element, a ragged range, when the addresses' shape is static)."""
    rng = g.rng
    dtype, (tr, tc) = g.dtype(), g.tile_shape(big=0)
    dims = g.ragged_dims(int(rng.integers(0, 2)))
    if rng.random() < 0.4:
        ntiles = int(rng.integers(1, 9))
        addr = g.host_input(dims, "Index()", {"below": ntiles}, prefix="a")
    else:
        onehot = rng.random() < 0.3
        k = int(rng.integers(2, 4)) if onehot else int(rng.integers(1, 5))
        src = g.host_input(dims, f"Select({k})" if onehot else "Index()",
                           {"onehot": True} if onehot else {"below": k}, prefix="a")
        shape = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 3))))
        strides = tuple(int(rng.integers(0, 4)) for _ in shape)
        scale, offset = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        top = offset + scale * (k - 1) + sum((n - 1) * st for n, st in zip(shape, strides))
        ntiles = top + 1
        extra = f", scale={scale}" if scale != 1 else ""
        extra += f", offset={offset}" if offset else ""
        ins = [src]
        # a count per element (0 ..shape[-1]) needs the values' structure: a static shape here
        if all(isinstance(d, int) for d in dims) and rng.random() < 0.4:
            n = g.host_input(dims, "Index()", {"below": shape[-1] + 1}, prefix="n")
            extra += f", count={n}"
            ins.append(n)
        addr = g.op(f"AddrGen({src}, {shape}, {strides}{extra})", ins,
                    key=("addrgen", g.struct[src], len(ins)))
    gc = int(rng.integers(1, 4))
    gr = -(-ntiles // gc)
    T = g.tensor((gr * tr, gc * tc), dtype)
    g.op(f"RandomOffChipLoad({addr}, {T}, {(tr, tc)})", [addr, T], key=g.struct[addr])


def _grid(g, ntiles):
    divisors = [d for d in range(1, ntiles + 1) if ntiles % d == 0]
    rows = g.choose(divisors)
    return rows, ntiles // rows


def scatter(g):
    x = g.pick(lambda s: static_tile(s) and s.dtype.rows <= 4 and s.dtype.cols <= 4
               and isinstance(g.program.cardinality(s), int))
    s = g.stream(x)
    k = g.program.cardinality(s)
    ntiles = int(g.rng.integers(1, k + 3))
    gr, gc = _grid(g, ntiles)
    T = g.tensor((gr * s.dtype.rows, gc * s.dtype.cols), s.dtype.dtype.name,
                 role="inout" if g.rng.random() < 0.3 else "output")
    addr = g.host_input([1, k], "Index()", {"below": ntiles}, prefix="w")
    g.op(f"RandomOffChipStore({addr}, {x}, {T})", [addr, x, T], key=g.struct[addr])


def store(g, x=None):
    if x is None:
        x = g.pick(lambda s: static_tile(s) and g.bound(g.program.cardinality(s)) is not None)
    s = g.stream(x)
    card = g.program.cardinality(s)
    ntiles = card if isinstance(card, int) else g.bound(card) + int(g.rng.integers(0, 2))
    if ntiles < 1:
        raise Skip("nothing to store")
    gr, gc = _grid(g, ntiles)
    T = g.tensor((gr * s.dtype.rows, gc * s.dtype.cols), s.dtype.dtype.name,
                 role="inout" if g.rng.random() < 0.2 else "output")
    g.emit(f"LinearOffChipStore({x}, {T})", (), [x, T])


def finish(g):
    """Store some of the streams nobody reads (two at most, so that a program keeps to its
    operator budget); the rest become the program's outputs."""
    used = {u for line in g.lines for u in line.uses}
    stored = 0
    for v in list(g.pool):
        s = g.stream(v)
        if stored == 2 or v in used or not static_tile(s) or g.rng.random() > 0.3:
            continue
        if g.bound(g.program.cardinality(s)) in (None, 0):
            continue
        store(g, v)
        stored += 1


MOTIFS = [(buffer, 2), (route, 2), (parallelize, 1.2), (merge, 0.8), (retile, 1.5),
          (filter_, 0.8), (gather, 1), (scatter, 0.7), (store, 0.8)]
