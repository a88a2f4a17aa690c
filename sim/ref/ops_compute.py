"""Meaning of the compute operators on token sequences (spec section 4, Compute).

:func:`map_tokens`, :func:`accum`, :func:`scan` and :func:`flat_map` are pure functions of token
lists and a Python callable (the element function), usable on their own by the hardware unit
tests; :func:`expander` gives the callable of a FlatMap library function. The registrations at
the end apply a node's tile function bit-exactly through :func:`stepforge.contract.arith.evaluate`
and check every dynamic tile size against its bound.
"""

import numpy as np

from ...compiler.errors import StepRuntimeError
from ...compiler.functions import AddrGen, KeepIf, RetileCols, RetileRows
from ...compiler.ops.compute import Accum, AddrGen as AddrGenNode, FlatMap, Filter, Map, \
    RetileStreamify, Scan
from ...compiler.types import Select, Tile, Tuple
from ...contract import arith
from ...contract.tokens import beat_index, is_stop, stop
from .interpreter import semantics
from .ops_shape import zip_streams

__all__ = ["map_tokens", "accum", "scan", "flat_map", "expander", "retile_rows", "retile_cols",
           "keep_if", "addr_gen", "check_value"]


def _call(f, value, tokens, i, op):
    try:
        return f(value)
    except arith.ArithError as e:
        bi = beat_index(tokens, i)
        raise StepRuntimeError(f"{op}: {e} at beat {bi}", op=op, beat=bi) from None


def map_tokens(tokens, f, *, op="Map"):
    """Apply ``f`` to every element; stops pass through."""
    return [t if is_stop(t) else _call(f, t, tokens, i, op) for i, t in enumerate(tokens)]


def accum(tokens, f, init, b, *, op="Accum"):
    """Fold with ``acc = f(acc, x)``; on a stop ``s >= b`` emit ``acc`` (then ``S_(s-b)`` when
    ``s > b``) and restart from ``init``. An empty level-``b`` fibre emits ``init``."""
    out = []
    acc = init
    for i, t in enumerate(tokens):
        if is_stop(t):
            if t.level >= b:
                out.append(acc)
                if t.level > b:
                    out.append(stop(t.level - b))
                acc = init
        else:
            acc = _call(lambda x: f(acc, x), t, tokens, i, op)
    return out


def scan(tokens, f, init, b, *, op="Scan"):
    """Emit the running ``acc = f(acc, x)`` after every element, with the input's stops; restart
    from ``init`` after a stop ``>= b``."""
    out = []
    acc = init
    for i, t in enumerate(tokens):
        if is_stop(t):
            out.append(t)
            if t.level >= b:
                acc = init
        else:
            acc = _call(lambda x: f(acc, x), t, tokens, i, op)
            out.append(acc)
    return out


def flat_map(tokens, expand, b, *, op="FlatMap"):
    """Replace every element by the rank-``b`` sub-stream ``expand(x)`` (a token list).

    The sub-streams of one level-1 fibre are concatenated; the fibre's stop ``s`` becomes
    ``S_(s+b)``: it replaces the closing ``S_b`` of the fibre's last sub-stream, or, when the
    fibre generated nothing, follows as a stop-only token (an empty fibre).
    """
    out = []
    emitted = False  # has the current level-1 fibre generated any token?
    for i, t in enumerate(tokens):
        if is_stop(t):
            if b > 0 and emitted:
                out[-1] = stop(t.level + b)
            else:
                out.append(stop(t.level + b))
            emitted = False
            continue
        sub = _call(expand, t, tokens, i, op)
        if sub:
            last = sub[-1]
            ok = (not is_stop(last)) if b == 0 else (is_stop(last) and last.level == b)
            if not ok or any(is_stop(s) and not 1 <= s.level <= b for s in sub):
                bi = beat_index(tokens, i)
                raise StepRuntimeError(f"{op}: the sub-stream generated at beat {bi} is not a "
                                       f"rank-{b} stream", op=op, beat=bi)
            out.extend(sub)
            emitted = True
    return out


# -- library expanders ---------------------------------------------------------------------------

def _valid_count(n, limit, what):
    if not 0 <= n <= limit:
        raise arith.ArithError(f"{n} valid {what} in a tile of {limit}")
    return n


def retile_rows(x, valid=None):
    """The rows of a tile as ``[1, C]`` tiles (the first ``valid`` ones when given)."""
    x = np.asarray(x)
    n = x.shape[0] if valid is None else _valid_count(valid, x.shape[0], "rows")
    return [x[r:r + 1, :].copy() for r in range(n)]


def retile_cols(x, valid=None):
    """The columns of a tile as ``[R, 1]`` tiles (the first ``valid`` ones when given)."""
    x = np.asarray(x)
    n = x.shape[1] if valid is None else _valid_count(valid, x.shape[1], "columns")
    return [x[:, c:c + 1].copy() for c in range(n)]


def keep_if(value, flag, keep=True):
    return [value] if bool(flag) == keep else []


def _addr_base(v):
    if isinstance(v, np.ndarray):
        return int(v.reshape(-1)[0])
    return int(v)


def addr_gen(v, shape, strides, scale=1, offset=0, count=None):
    """The rank-``len(shape) - 1`` stream of addresses ``offset + scale*v + sum(i[k]*strides[k])``.

    Stops follow the walk: after the last index of the innermost ``j`` dimensions (counting
    up to ``b = len(shape) - 1``) the address carries ``S_j``. With ``count`` the innermost
    dimension has ``count`` indices (``0 <= count <= shape[-1]``); with ``count = 0`` each of
    its fibres is empty: nothing for ``b = 0``, a stop only for ``b >= 1``.
    """
    b = len(shape) - 1
    base = offset + scale * v
    empty = False
    if count is not None:
        if not 0 <= count <= shape[-1]:
            raise arith.ArithError(f"addr_gen count {count} is outside 0..{shape[-1]} (the "
                                   f"bound of the walk's innermost dimension)")
        if count == 0 and b == 0:
            return []
        empty = count == 0
        shape = tuple(shape[:-1]) + (max(count, 1),)
    out = []
    idx = [0] * len(shape)
    total = 1
    for d in shape:
        total *= d
    for _ in range(total):
        if not empty:
            a = base + sum(i * s for i, s in zip(idx, strides))
            if not 0 <= a < (1 << 32):
                raise arith.ArithError(f"address {a} is not a 32-bit unsigned int")
            out.append(a)
        level = 0
        for k in range(b, 0, -1):  # innermost dimension first; level b at most
            if idx[k] == shape[k] - 1:
                level += 1
            else:
                break
        if level:
            out.append(stop(level))
        # advance the multi-index (innermost fastest)
        for k in range(len(shape) - 1, -1, -1):
            idx[k] += 1
            if idx[k] < shape[k]:
                break
            idx[k] = 0
    return out


def _select_index(mask):
    if mask <= 0 or mask & (mask - 1):
        raise arith.ArithError(f"addr_gen needs a one-hot selector, got mask {mask:#b}")
    return mask.bit_length() - 1


def expander(fn, elem_type):
    """The Python callable (element -> token list) of a FlatMap library function."""
    if isinstance(fn, (RetileRows, RetileCols)):
        split = retile_cols if isinstance(fn, RetileCols) else retile_rows
        close = [stop(1)] if fn.b == 1 else []
        if fn.valid:
            return lambda x: split(x[0], x[1]) + close
        return lambda x: split(x) + close
    if isinstance(fn, KeepIf):
        return lambda x: keep_if(x[0], x[1], fn.keep)
    if isinstance(fn, AddrGen):
        if fn.counted:
            value = _select_index if isinstance(elem_type.elems[0], Select) else _addr_base
            return lambda x: addr_gen(value(x[0]), fn.shape, fn.strides, fn.scale, fn.offset,
                                      count=int(x[1]))
        value = _select_index if isinstance(elem_type, Select) else _addr_base
        return lambda x: addr_gen(value(x), fn.shape, fn.strides, fn.scale, fn.offset)
    raise TypeError(f"the interpreter has no expansion for {fn!r}")


# -- run-time checks of dynamic tile sizes -------------------------------------------------------

def check_value(value, elem_type, program, *, op, beat):
    """Check a tile against its type: static sizes equal, dynamic sizes within their bounds."""
    if isinstance(elem_type, Tuple):
        for v, t in zip(value, elem_type.elems):
            check_value(v, t, program, op=op, beat=beat)
        return
    if not isinstance(elem_type, Tile):
        return
    shape = np.shape(value)
    for got, want, what in zip(shape, elem_type.shape, ("rows", "cols")):
        if isinstance(want, int):
            if got != want:
                raise StepRuntimeError(f"{op}: a {elem_type!r} element has {got} {what} at beat "
                                       f"{beat}", op=op, beat=beat)
            continue
        bound = program.symbols.bound(want)
        if bound is not None and got > bound:
            raise StepRuntimeError(f"{op}: dimension {want} ({what} of a {elem_type!r} element) is "
                                   f"{got}, over its bound {bound} at beat {beat}", op=op, beat=beat)


def _checked(node, tokens, out_tokens):
    t = node.outputs[0].dtype
    if isinstance(t, (Tile, Tuple)):
        for i, v in enumerate(out_tokens):
            if not is_stop(v):
                check_value(v, t, node.program, op=node.name, beat=beat_index(out_tokens, i))
    return out_tokens


def _elements(node, ins):
    """The input as one token list (several inputs zipped in lock step, stops checked)."""
    if len(ins) == 1:
        return ins[0]
    return zip_streams(ins, op=node.name)


def _apply(node):
    """The element function of a Map/Accum/Scan node: tuples are spread over ``fn``'s parameters
    when the node unpacks them (and for a Map of several streams, whose zipped elements are
    tuples)."""
    fn = node.fn
    if node.unpack:
        return lambda *acc_x: arith.evaluate(fn, *acc_x[:-1], *acc_x[-1])
    return lambda *acc_x: arith.evaluate(fn, *acc_x)


# -- registration ----------------------------------------------------------------------------------

@semantics(Map)
def _map(node, ins, ctx):
    tokens = _elements(node, ins)
    f = _apply(node)
    return [_checked(node, tokens, map_tokens(tokens, f, op=node.name))]


@semantics(Accum)
def _accum(node, ins, ctx):
    tokens = _elements(node, ins)
    init = arith.init_value(node.init)
    return [_checked(node, tokens, accum(tokens, _apply(node), init, node.b, op=node.name))]


@semantics(Scan)
def _scan(node, ins, ctx):
    tokens = _elements(node, ins)
    init = arith.init_value(node.init)
    return [_checked(node, tokens, scan(tokens, _apply(node), init, node.b, op=node.name))]


@semantics(FlatMap, RetileStreamify, Filter, AddrGenNode)
def _flat_map(node, ins, ctx):
    tokens = _elements(node, ins)
    return [flat_map(tokens, expander(node.fn, node.elem_type), node.b, op=node.name)]
