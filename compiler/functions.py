"""Functions that the higher-order operators apply (spec section 4, Compute).

Tile functions
--------------
Map, Accum and Scan apply a :class:`TileFunction`: a small expression graph over the function's
parameters whose nodes are the primitives below. A function is checked against its argument types
when the operator is built (:meth:`TileFunction.infer`), reports its FLOPs
(:meth:`TileFunction.flops`), and is evaluated bit-exactly by the reference interpreter
(:func:`stepforge.contract.arith.evaluate`; the numerics are in ``docs/arithmetic.md``).

==================  =====================================  ==============================  ========
primitive           meaning                                types                           FLOPs
==================  =====================================  ==============================  ========
``add sub mul div`` elementwise, size-1 dims broadcast     one dtype                       1 / out
``maximum``         elementwise maximum                    one dtype                       1 / out
``exp`` ``rsqrt``   elementwise                            float; int8/int16 fixed point   4 / elt
``silu``            ``x * sigmoid(x)``                     float; int8/int16 fixed point   8 / elt
``row_sum``         ``[R, C] -> [R, 1]``                   any                             1 / in
``row_max``         ``[R, C] -> [R, 1]``                   any                             1 / in
``matmul``          ``a @ b`` or ``a @ b.T``               one dtype in, ``out`` out       2 M K N
``mac``             ``acc + a @ b`` (one running sum)      acc's dtype out                 2 M K N
``scale(c)``        ``x * c`` with a constant              any                             1 / elt
``cast(dtype)``     conversion                             any                             0
``retile_row/col``  concatenate rows / columns             one dtype                       0
==================  =====================================  ==============================  ========

On ``int8`` and ``int16`` tiles ``exp``, ``silu`` and ``rsqrt`` read the elements as fixed-point
numbers (Q4.4 and Q8.8) and return the same format, by a table-driven piecewise-linear
approximation (``stepforge.contract.fixedpoint``, ``docs/arithmetic.md`` section 7).

User functions are built from these by tracing a Python function::

    from stepforge.compiler import functions as F
    gate = F.function(lambda x, w1, w3: F.silu(x @ w1) * (x @ w3))
    Map(gate, x, w1, w3)

Inside a traced function, parameters support ``+ - * / @``, ``b.T`` (only as the right operand of
``@``), Python numbers as operands (a constant of the other operand's dtype), ``t[i]`` on tuple
parameters, and the methods ``.exp() .silu() .rsqrt() .row_sum() .row_max() .maximum(y)
.cast(dtype)``. Returning a Python tuple makes a ``Tuple`` result.

Stream functions
----------------
FlatMap applies a :class:`StreamFunction`, which expands one element into a rank-``b``
sub-stream: :func:`retile_rows`, :func:`retile_cols`, :func:`keep_if` and :func:`addr_gen`.

Accumulator initial values
--------------------------
Accum and Scan start from an :class:`Init`: :func:`zeros`, :func:`full`, :func:`empty_rows`,
:func:`empty_cols`, or a tuple of these for a ``Tuple`` accumulator.
"""

import inspect
import numbers

import sympy

from .dims import dim_eq, fmt_shape, norm_dim
from .errors import StepShapeError, StepTypeError
from .types import Bool, DType, Index, Select, Tile, Tuple, int32

__all__ = [
    "Expr", "TileFunction", "function", "as_function", "FIXED_POINT_DTYPES",
    "add", "sub", "mul", "div", "maximum", "exp", "silu", "rsqrt", "row_sum", "row_max",
    "matmul", "mac", "scale", "cast", "retile_row", "retile_col",
    "Init", "zeros", "full", "empty_rows", "empty_cols", "as_init",
    "StreamFunction", "RetileRows", "RetileCols", "KeepIf", "AddrGen",
    "retile_rows", "retile_cols", "keep_if", "addr_gen",
]


# -- expressions ---------------------------------------------------------------------------------

class Expr:
    """A node of a tile function's expression graph.

    Attributes
    ----------
    op : str
        ``"arg"`` (a parameter), ``"const"`` (a Python number), ``"get"``, ``"tuple"`` or a
        primitive's name.
    args : tuple of Expr
    attrs : dict
        The primitive's parameters (``index``/``name`` for ``arg``, ``value`` for ``const``,
        ``transpose_b``/``out`` for ``matmul``, ...).
    """
    __slots__ = ("op", "args", "attrs")

    def __init__(self, op, args=(), attrs=None):
        self.op = op
        self.args = tuple(args)
        self.attrs = dict(attrs or {})

    # arithmetic
    def __add__(self, other):
        return _apply("add", self, other)

    def __radd__(self, other):
        return _apply("add", other, self)

    def __sub__(self, other):
        return _apply("sub", self, other)

    def __rsub__(self, other):
        return _apply("sub", other, self)

    def __mul__(self, other):
        return _apply("mul", self, other)

    def __rmul__(self, other):
        return _apply("mul", other, self)

    def __truediv__(self, other):
        return _apply("div", self, other)

    def __rtruediv__(self, other):
        return _apply("div", other, self)

    def __matmul__(self, other):
        if isinstance(other, _Transposed):
            return Expr("matmul", (self, other.expr), {"transpose_b": True, "out": None})
        return Expr("matmul", (self, _lift(other, "@")), {"transpose_b": False, "out": None})

    @property
    def T(self):
        """The transpose, only as the right operand of ``@`` (``a @ b.T``)."""
        return _Transposed(self)

    def __getitem__(self, i):
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"a tuple field is selected by an int, not {i!r}")
        return Expr("get", (self,), {"index": i})

    def exp(self):
        return Expr("exp", (self,))

    def silu(self):
        return Expr("silu", (self,))

    def rsqrt(self):
        return Expr("rsqrt", (self,))

    def row_sum(self):
        return Expr("row_sum", (self,))

    def row_max(self):
        return Expr("row_max", (self,))

    def maximum(self, other):
        return _apply("maximum", self, other)

    def cast(self, dtype, *, saturate=False):
        return cast(dtype, saturate=saturate)(self)

    def __bool__(self):
        raise TypeError("a traced tile value has no truth value (tile functions have no "
                        "data-dependent Python control flow)")

    def __iter__(self):
        raise TypeError("a traced tile value is not iterable (select tuple fields with t[i])")

    def __repr__(self):
        return _fmt(self, {})


class _Transposed:
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    def __repr__(self):
        return f"{self.expr!r}.T"


def _lift(x, where):
    if isinstance(x, Expr):
        return x
    if isinstance(x, _Transposed):
        raise TypeError(f"'{where}': a transpose (.T) is only allowed as the right operand of @")
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return Expr("const", (), {"value": x})
    raise TypeError(f"'{where}': cannot use {type(x).__name__} {x!r} in a tile function")


def _apply(op, a, b):
    return Expr(op, (_lift(a, op), _lift(b, op)))


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _fmt(e, names):
    if e.op == "arg":
        return names.get(e.attrs["index"], e.attrs.get("name") or f"arg{e.attrs['index']}")
    if e.op == "const":
        return repr(e.attrs["value"])
    a = [_fmt(x, names) for x in e.args]
    if e.op in _INFIX:
        return f"({a[0]} {_INFIX[e.op]} {a[1]})"
    if e.op == "matmul":
        s = f"({a[0]} @ {a[1]}{'.T' if e.attrs['transpose_b'] else ''})"
        return s if e.attrs["out"] is None else f"{s}.cast({e.attrs['out']!r})"
    if e.op == "mac":
        return f"mac({a[0]}, {a[1]}, {a[2]}{'.T' if e.attrs['transpose_b'] else ''})"
    if e.op == "get":
        return f"{a[0]}[{e.attrs['index']}]"
    if e.op == "tuple":
        return "(" + ", ".join(a) + ("," if len(a) == 1 else "") + ")"
    if e.op == "cast":
        sat = ", saturate=True" if e.attrs["saturate"] else ""
        return f"cast({a[0]}, {e.attrs['dtype']!r}{sat})"
    return f"{e.op}({', '.join(a)})"


def _topo(root):
    """The expressions reachable from ``root``, every node after its arguments."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        for a in reversed(e.args):
            if id(a) not in seen:
                stack.append((a, False))
    return order


# -- primitive typing rules ----------------------------------------------------------------------

class _Fail(Exception):
    """A typing rule failed; ``operand`` is the index of the argument at fault."""

    def __init__(self, cls, operand, message):
        super().__init__(message)
        self.cls, self.operand, self.message = cls, operand, message


class _Const:
    """The type of a Python number before its partner operand fixes its dtype."""

    def __init__(self, value):
        self.value = value


def _tile(t, i, op, what="a tile"):
    if not isinstance(t, Tile):
        raise _Fail(StepTypeError, i, f"{op} needs {what} as operand {i}, got {t!r}")
    return t


def _float(t, i, op):
    if not t.dtype.is_float:
        raise _Fail(StepTypeError, i, f"{op} needs a float tile (bf16 or fp32), got {t!r} "
                    f"{fmt_shape(t.shape)}")


def _check_const(value, dtype, i, op):
    if dtype.is_float:
        return
    if not isinstance(value, numbers.Integral) or not dtype.min <= value <= dtype.max:
        raise _Fail(StepTypeError, i, f"{op}: constant {value!r} is not an {dtype!r} value "
                    f"({dtype.min}..{dtype.max})")


def _bcast(x, y):
    if dim_eq(x, y):
        return x
    if isinstance(x, int) and x == 1:
        return y
    if isinstance(y, int) and y == 1:
        return x
    return None


def _infer_elementwise(e, ts):
    op = e.op
    a, b = ts
    if isinstance(a, _Const) and isinstance(b, _Const):
        raise _Fail(StepTypeError, 0, f"{op} needs at least one tile operand, got two constants")
    if isinstance(a, _Const):
        _tile(b, 1, op)
        _check_const(a.value, b.dtype, 0, op)
        return b
    if isinstance(b, _Const):
        _tile(a, 0, op)
        _check_const(b.value, a.dtype, 1, op)
        return a
    _tile(a, 0, op)
    _tile(b, 1, op)
    if a.dtype != b.dtype:
        raise _Fail(StepTypeError, 1, f"{op} needs operands of one dtype: {a!r} {fmt_shape(a.shape)} "
                    f"vs {b!r} {fmt_shape(b.shape)} (cast one of them)")
    rows, cols = _bcast(a.rows, b.rows), _bcast(a.cols, b.cols)
    if rows is None or cols is None:
        raise _Fail(StepShapeError, 1, f"{op} needs operands of one shape or with size-1 "
                    f"dimensions to broadcast: {fmt_shape(a.shape)} vs {fmt_shape(b.shape)}")
    return Tile(a.dtype, rows, cols)


#: Integer dtypes on which exp, silu and rsqrt exist in fixed point (Q4.4 and Q8.8; the
#: formats and the approximations are in ``stepforge.contract.fixedpoint`` and ``docs/arithmetic.md``).
FIXED_POINT_DTYPES = ("int8", "int16")


def _infer_unary_nonlinear(e, ts):
    t = _tile(ts[0], 0, e.op)
    if not t.dtype.is_float and t.dtype.name in FIXED_POINT_DTYPES:
        return t  # fixed point, same dtype
    if not t.dtype.is_float:
        raise _Fail(StepTypeError, 0, f"{e.op} needs a float tile (bf16 or fp32), got {t!r} "
                    f"{fmt_shape(t.shape)}; on integers it exists in fixed point for int8 (Q4.4) "
                    f"and int16 (Q8.8) only (cast first)")
    _float(t, 0, e.op)
    return t


def _infer_row(e, ts):
    t = _tile(ts[0], 0, e.op)
    return Tile(t.dtype, t.rows, 1)


def _mm_shapes(op, a, b, transpose_b, ia=0, ib=1):
    _tile(a, ia, op)
    _tile(b, ib, op)
    if a.dtype != b.dtype:
        raise _Fail(StepTypeError, ib, f"{op} needs operands of one dtype: {a!r} {fmt_shape(a.shape)} "
                    f"vs {b!r} {fmt_shape(b.shape)}")
    k_b, n = (b.cols, b.rows) if transpose_b else (b.rows, b.cols)
    if not dim_eq(a.cols, k_b):
        form = "a @ b.T needs a's columns to equal b's columns" if transpose_b else \
            "a @ b needs a's columns to equal b's rows"
        raise _Fail(StepShapeError, ib, f"{op}: {form}: {fmt_shape(a.shape)} vs {fmt_shape(b.shape)}")
    return a.rows, a.cols, n


def _infer_matmul(e, ts):
    a, b = ts
    m, _, n = _mm_shapes("matmul", a, b, e.attrs["transpose_b"])
    out = e.attrs["out"] or (a.dtype if a.dtype.is_float else int32)
    if out.is_float != a.dtype.is_float:
        raise _Fail(StepTypeError, 0, f"matmul of {a.dtype!r} tiles cannot produce {out!r} "
                    f"(cast the operands instead)")
    return Tile(out, m, n)


def _infer_mac(e, ts):
    acc, a, b = ts
    _tile(acc, 0, "mac", "an accumulator tile")
    m, _, n = _mm_shapes("mac", a, b, e.attrs["transpose_b"], 1, 2)
    if acc.dtype.is_float != a.dtype.is_float:
        raise _Fail(StepTypeError, 0, f"mac cannot accumulate {a.dtype!r} products into a "
                    f"{acc.dtype!r} accumulator")
    if not (dim_eq(acc.rows, m) and dim_eq(acc.cols, n)):
        raise _Fail(StepShapeError, 0, f"mac: the accumulator {fmt_shape(acc.shape)} must have the "
                    f"shape of the product {fmt_shape((m, n))}")
    return acc


def _infer_cast(e, ts):
    t = _tile(ts[0], 0, "cast")
    return Tile(e.attrs["dtype"], t.rows, t.cols)


def _infer_concat(e, ts):
    a, b = ts
    _tile(a, 0, e.op)
    _tile(b, 1, e.op)
    if a.dtype != b.dtype:
        raise _Fail(StepTypeError, 1, f"{e.op} needs tiles of one dtype: {a!r} {fmt_shape(a.shape)} "
                    f"vs {b!r} {fmt_shape(b.shape)}")
    if e.op == "retile_row":
        if not dim_eq(a.cols, b.cols):
            raise _Fail(StepShapeError, 1, f"retile_row stacks rows of one width: "
                        f"{fmt_shape(a.shape)} vs {fmt_shape(b.shape)}")
        return Tile(a.dtype, norm_dim(sympy.sympify(a.rows) + b.rows), a.cols)
    if not dim_eq(a.rows, b.rows):
        raise _Fail(StepShapeError, 1, f"retile_col joins columns of one height: "
                    f"{fmt_shape(a.shape)} vs {fmt_shape(b.shape)}")
    return Tile(a.dtype, a.rows, norm_dim(sympy.sympify(a.cols) + b.cols))


def _infer_get(e, ts):
    t = ts[0]
    i = e.attrs["index"]
    if not isinstance(t, Tuple):
        raise _Fail(StepTypeError, 0, f"field [{i}] of {t!r}: not a tuple")
    if not 0 <= i < len(t.elems):
        raise _Fail(StepTypeError, 0, f"field [{i}] of {t!r}: a tuple of {len(t.elems)} fields")
    return t.elems[i]


def _infer_tuple(e, ts):
    for i, t in enumerate(ts):
        if isinstance(t, _Const):
            raise _Fail(StepTypeError, i, "a function cannot return a bare constant")
    return Tuple(*ts)


def _elems(t):
    return norm_dim(sympy.sympify(t.rows) * t.cols)


def _flops(e, ts, out):
    op = e.op
    if op in ("add", "sub", "mul", "div", "maximum"):
        return _elems(out)
    if op in ("exp", "rsqrt"):
        return norm_dim(4 * sympy.sympify(_elems(out)))
    if op == "silu":
        return norm_dim(8 * sympy.sympify(_elems(out)))
    if op in ("row_sum", "row_max"):
        return _elems(ts[0])
    if op in ("matmul", "mac"):
        a = ts[0] if op == "matmul" else ts[1]
        return norm_dim(2 * sympy.sympify(a.rows) * a.cols * out.cols)
    return 0


_RULES = {
    "add": _infer_elementwise, "sub": _infer_elementwise, "mul": _infer_elementwise,
    "div": _infer_elementwise, "maximum": _infer_elementwise,
    "exp": _infer_unary_nonlinear, "silu": _infer_unary_nonlinear, "rsqrt": _infer_unary_nonlinear,
    "row_sum": _infer_row, "row_max": _infer_row,
    "matmul": _infer_matmul, "mac": _infer_mac, "cast": _infer_cast,
    "retile_row": _infer_concat, "retile_col": _infer_concat,
    "get": _infer_get, "tuple": _infer_tuple,
}

PRIMITIVES = tuple(k for k in _RULES if k not in ("get", "tuple"))


# -- tile functions ------------------------------------------------------------------------------

class TileFunction:
    """A function of tiles (and tuples of tiles) that Map, Accum and Scan apply.

    Parameters
    ----------
    name : str
    params : sequence of str
        Parameter names (the function's arity is their number).
    body : Expr
        The result, an expression over ``Expr("arg", attrs={"index": i})`` leaves.
    accum : str or None
        ``"rows"``/``"cols"`` for the retiling accumulators, whose accumulator grows (see
        :meth:`accum_type`).
    """

    def __init__(self, name, params, body, *, accum=None, label=None):
        self.name = name
        self.label = label
        self.params = tuple(params)
        self.body = body
        self.accum = accum
        self._order = _topo(body)
        for e in self._order:
            if e.op == "arg" and not 0 <= e.attrs["index"] < len(self.params):
                raise ValueError(f"{name}: parameter {e.attrs['index']} out of range")
            if e.op not in _RULES and e.op not in ("arg", "const"):
                raise ValueError(f"{name}: unknown primitive {e.op!r}")
        if body.op == "const":
            raise TypeError(f"{name}: a tile function cannot return a bare constant")

    @property
    def arity(self):
        return len(self.params)

    @property
    def primitive(self):
        """The primitive's name when the function is one primitive applied to its parameters in
        order (what a hardware unit implements directly), else ``None``."""
        b = self.body
        if b.op in PRIMITIVES and len(b.args) == self.arity and all(
                a.op == "arg" and a.attrs["index"] == i for i, a in enumerate(b.args)):
            return b.op
        return None

    @property
    def ops(self):
        """The primitives the function uses, in evaluation order, each once."""
        seen = []
        for e in self._order:
            if e.op in PRIMITIVES and e.op not in seen:
                seen.append(e.op)
        return tuple(seen)

    def expressions(self):
        """Every node of the body, each after its arguments (an evaluation order)."""
        return list(self._order)

    def __call__(self, *args):
        """Apply the function to traced values: inline its body."""
        if len(args) != self.arity:
            raise TypeError(f"{self.name} takes {self.arity} arguments, got {len(args)}")
        args = [_lift(a, self.name) for a in args]
        memo = {}
        for e in self._order:
            if e.op == "arg":
                memo[id(e)] = args[e.attrs["index"]]
            elif e.op == "const":
                memo[id(e)] = e
            else:
                memo[id(e)] = Expr(e.op, [memo[id(a)] for a in e.args], e.attrs)
        return memo[id(self.body)]

    # -- types and metrics --

    def _types(self, arg_types):
        if len(arg_types) != self.arity:
            err = StepTypeError(f"{self.name} takes {self.arity} arguments, got {len(arg_types)}")
            err.arg = None
            raise err
        types, deps = {}, {}
        for e in self._order:
            if e.op == "arg":
                i = e.attrs["index"]
                types[id(e)] = arg_types[i]
                deps[id(e)] = {i}
                continue
            if e.op == "const":
                types[id(e)] = _Const(e.attrs["value"])
                deps[id(e)] = set()
                continue
            deps[id(e)] = set().union(*(deps[id(a)] for a in e.args))
            try:
                types[id(e)] = _RULES[e.op](e, [types[id(a)] for a in e.args])
            except _Fail as f:
                culprit = deps[id(e.args[f.operand])] if f.operand < len(e.args) else set()
                msg = f.message if f.message.startswith(self.name) else f"{self.name}: {f.message}"
                err = f.cls(msg)
                err.arg = max(culprit) if culprit else None
                raise err from None
        return types

    def infer(self, *arg_types):
        """The result's element type for arguments of ``arg_types``.

        Raises
        ------
        StepTypeError, StepShapeError
            With an ``arg`` attribute: the index of the parameter at fault (or ``None``).
        """
        return self._types(arg_types)[id(self.body)]

    def expression_types(self, *arg_types):
        """Every node of the body with its type, in evaluation order (for the lowering).

        Returns
        -------
        list of (Expr, ElemType or None)
            ``None`` for a Python-number constant, whose dtype is its partner operand's.
        """
        types = self._types(arg_types)
        return [(e, None if isinstance(types[id(e)], _Const) else types[id(e)]) for e in self._order]

    def flops(self, *arg_types):
        """Arithmetic operations of one application (spec section 5)."""
        types = self._types(arg_types)
        total = sympy.Integer(0)
        for e in self._order:
            if e.op in PRIMITIVES:
                total = total + sympy.sympify(_flops(e, [types[id(a)] for a in e.args], types[id(e)]))
        return norm_dim(total)

    def matmuls(self, *arg_types):
        """``(a, b, out)`` tile types of every matmul/mac, ``b`` as stored (before any ``.T``)."""
        types = self._types(arg_types)
        out = []
        for e in self._order:
            if e.op == "matmul":
                out.append((types[id(e.args[0])], types[id(e.args[1])], types[id(e)]))
            elif e.op == "mac":
                out.append((types[id(e.args[1])], types[id(e.args[2])], types[id(e)]))
        return out

    def accum_type(self, init_type, elem_type, count):
        """The accumulator of a retiling function after ``count`` elements.

        ``retile_row`` grows the rows: ``init.rows + count * elem.rows``; ``retile_col`` the
        columns.
        """
        if self.accum is None:
            raise TypeError(f"{self.name} is not a retiling accumulator")
        t = self.infer(init_type, elem_type)
        if self.accum == "rows":
            return Tile(t.dtype, norm_dim(sympy.sympify(init_type.rows) + sympy.sympify(count) * elem_type.rows),
                        t.cols)
        return Tile(t.dtype, t.rows,
                    norm_dim(sympy.sympify(init_type.cols) + sympy.sympify(count) * elem_type.cols))

    def __repr__(self):
        if self.label is not None:
            return self.label
        if self.primitive is not None and not self.body.attrs:
            return self.name
        if self.primitive is not None:
            attrs = ", ".join(f"{k}={v!r}" for k, v in self.body.attrs.items() if v not in (None, False))
            return f"{self.name}({attrs})"
        names = dict(enumerate(self.params))
        return f"{self.name}({', '.join(self.params)}) = {_fmt(self.body, names)}"


def _prim(op, params, attrs=None, *, accum=None, label=None):
    body = Expr(op, [Expr("arg", (), {"index": i, "name": p}) for i, p in enumerate(params)], attrs)
    return TileFunction(op, params, body, accum=accum, label=label)


def function(fn=None, *, name=None):
    """Make a :class:`TileFunction` by tracing the Python function ``fn`` (also a decorator).

    ``fn`` is called once with one traced value per parameter; what it returns (an expression,
    or a tuple of expressions) becomes the body.
    """
    if fn is None:
        return lambda f: function(f, name=name)
    if isinstance(fn, TileFunction):
        return fn
    if not callable(fn):
        raise TypeError(f"function() needs a callable, not {fn!r}")
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.default is not p.empty:
            raise TypeError(f"a tile function takes plain positional parameters; {p} is not one")
        params.append(p.name)
    args = [Expr("arg", (), {"index": i, "name": p}) for i, p in enumerate(params)]
    out = fn(*args)
    if isinstance(out, (tuple, list)):
        out = Expr("tuple", [_lift(o, "return") for o in out])
    elif not isinstance(out, Expr):
        raise TypeError(f"a tile function must return a traced value or a tuple of them, "
                        f"got {type(out).__name__} {out!r}")
    fname = name or (fn.__name__ if fn.__name__ != "<lambda>" else "fn")
    return TileFunction(fname, params, out)


def as_function(fn):
    """``fn`` if it is a :class:`TileFunction`, else ``function(fn)`` for a Python callable."""
    if isinstance(fn, TileFunction):
        return fn
    if callable(fn) and not isinstance(fn, StreamFunction):
        return function(fn)
    raise TypeError(f"expected a tile function, got {fn!r}")


add = _prim("add", ("a", "b"))
sub = _prim("sub", ("a", "b"))
mul = _prim("mul", ("a", "b"))
div = _prim("div", ("a", "b"))
maximum = _prim("maximum", ("a", "b"))
exp = _prim("exp", ("x",))
silu = _prim("silu", ("x",))
rsqrt = _prim("rsqrt", ("x",))
row_sum = _prim("row_sum", ("x",))
row_max = _prim("row_max", ("x",))
retile_row = _prim("retile_row", ("acc", "x"), accum="rows")
retile_col = _prim("retile_col", ("acc", "x"), accum="cols")


def _dtype_arg(dtype, what):
    if not isinstance(dtype, DType):
        raise TypeError(f"{what} needs a DType (int8, int16, int32, bf16, fp32), not {dtype!r}")
    return dtype


class _Configurable(TileFunction):
    """A library function with options: ``f(a, b)`` applies it, ``f(option=...)`` returns a new
    function with those options (``f()`` is ``f``), ``f(a, b, option=...)`` does both."""

    def __init__(self, op, params, make, **options):
        self._make = make
        self.options = options
        attrs = dict(options)
        shown = ", ".join(f"{k}={v!r}" for k, v in options.items() if v not in (None, False))
        label = f"{op}({shown})" if shown else op
        body = Expr(op, [Expr("arg", (), {"index": i, "name": p}) for i, p in enumerate(params)], attrs)
        super().__init__(op, params, body, label=label)

    def __call__(self, *args, **options):
        f = self._make(**{**self.options, **options}) if options else self
        if not args:
            return f
        return TileFunction.__call__(f, *args)


def _check_matmul_options(transpose_b, out):
    if out is not None:
        _dtype_arg(out, "matmul(out=...)")
    return {"transpose_b": bool(transpose_b), "out": out}


def _make_matmul(transpose_b=False, out=None):
    return _Configurable("matmul", ("a", "b"), _make_matmul, **_check_matmul_options(transpose_b, out))


def _make_mac(transpose_b=False):
    return _Configurable("mac", ("acc", "a", "b"), _make_mac, transpose_b=bool(transpose_b))


matmul = _make_matmul()
matmul.__doc__ = """``a @ b`` (``a @ b.T`` with ``transpose_b=True``); ``out`` is the result dtype (default:
the operands' dtype for floats, ``int32`` for integers). Products are summed in one running sum in
``k`` order (``docs/arithmetic.md``). ``matmul(a, b)`` applies it, ``matmul(out=fp32)`` configures
it."""

mac = _make_mac()
mac.__doc__ = """``acc + a @ b``: the products are added to the accumulator one by one in ``k`` order,
as a multiply-accumulate unit does; the result has the accumulator's type. ``mac(transpose_b=True)``
configures it."""


def scale(c):
    """``x * c`` for a constant ``c`` (rounded to the tile's dtype, see ``docs/arithmetic.md``)."""
    if not isinstance(c, numbers.Real) or isinstance(c, bool):
        raise TypeError(f"scale() needs a number, not {c!r}")
    x = Expr("arg", (), {"index": 0, "name": "x"})
    return TileFunction("scale", ("x",), Expr("mul", (x, Expr("const", (), {"value": c}))),
                        label=f"scale({c!r})")


def cast(dtype, *, saturate=False):
    """Convert a tile to ``dtype``. Float to int rounds to nearest-even and saturates; int to int
    wraps unless ``saturate``; see ``docs/arithmetic.md``."""
    _dtype_arg(dtype, "cast()")
    return _prim("cast", ("x",), {"dtype": dtype, "saturate": bool(saturate)},
                 label=f"cast({dtype!r}{', saturate=True' if saturate else ''})")


# -- accumulator initial values ------------------------------------------------------------------

class Init:
    """The initial value of an Accum/Scan accumulator.

    Attributes
    ----------
    type : ElemType
    fill : number or tuple of Init
        The value every element of the tile holds (for a ``Tuple``: the fields' inits).
    """

    def __init__(self, type, fill):
        self.type = type
        self.fill = fill

    def __repr__(self):
        if isinstance(self.type, Tuple):
            return "(" + ", ".join(repr(f) for f in self.fill) + ")"
        t = self.type
        if (isinstance(t.rows, int) and t.rows == 0) or (isinstance(t.cols, int) and t.cols == 0):
            return f"empty({t!r})"
        return f"full({t!r}, {self.fill!r})"


def full(type, value):
    """A tile of static shape holding ``value`` everywhere (a Python number, ``-inf`` allowed
    for floats; for ints it must be in range)."""
    if not isinstance(type, Tile):
        raise StepTypeError(f"full() needs a Tile type, not {type!r}")
    if not type.is_static:
        raise StepShapeError(f"full() needs a static tile shape, got {fmt_shape(type.shape)}")
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise StepTypeError(f"full() needs a number, not {value!r}")
    if not type.dtype.is_float and (not isinstance(value, numbers.Integral)
                                    or not type.dtype.min <= value <= type.dtype.max):
        raise StepTypeError(f"full(): {value!r} is not an {type.dtype!r} value")
    return Init(type, value)


def zeros(type):
    """A zero tile (``+0.0`` for floats) of static shape."""
    return full(type, 0)


def empty_rows(dtype, cols):
    """A ``[0, cols]`` tile: the start of a :data:`retile_row` accumulator."""
    _dtype_arg(dtype, "empty_rows()")
    return Init(Tile(dtype, 0, cols), 0)


def empty_cols(dtype, rows):
    """A ``[rows, 0]`` tile: the start of a :data:`retile_col` accumulator."""
    _dtype_arg(dtype, "empty_cols()")
    return Init(Tile(dtype, rows, 0), 0)


def as_init(init, elem_type=None, fn=None):
    """``init`` as an :class:`Init`.

    Accepted: an Init; a tuple of them; a number (a tile of ``elem_type`` filled with it); a
    ``Tile`` type (zeros of that type); ``None`` for a retiling ``fn`` (the empty tile that
    ``retile_row``/``retile_col`` grows from, shaped after ``elem_type``).
    """
    if isinstance(init, Init):
        return init
    if isinstance(init, tuple):
        fields = tuple(as_init(i) for i in init)
        return Init(Tuple(*(f.type for f in fields)), fields)
    if isinstance(init, Tile):
        return zeros(init)
    if init is None:
        if fn is None or fn.accum is None or not isinstance(elem_type, Tile):
            raise StepTypeError(f"init=None is only for retile_row/retile_col on a tile stream "
                                f"(fn {fn!r}, elements {elem_type!r})")
        if fn.accum == "rows":
            return empty_rows(elem_type.dtype, elem_type.cols)
        return empty_cols(elem_type.dtype, elem_type.rows)
    if isinstance(init, numbers.Real) and not isinstance(init, bool):
        if not isinstance(elem_type, Tile):
            raise StepTypeError(f"a number as init needs a tile stream to take its type from, "
                                f"got {elem_type!r}")
        return full(elem_type, init)
    raise StepTypeError(f"init must be an Init (zeros, full, empty_rows, ...), a tuple of them, a "
                        f"Tile type (zeros), a number or None (retiling), not {init!r}")


# -- stream functions (FlatMap) ------------------------------------------------------------------

class StreamFunction:
    """What FlatMap applies: one element to a rank-``b`` sub-stream.

    Subclasses define :meth:`infer`, returning ``(elem_type, per_elem, inner)``: the generated
    element type, the number of level-``b`` pieces (rank-``b`` tensors; elements when ``b = 0``)
    each input element yields (``None`` when it depends on the data, with :meth:`max_per_elem`
    its bound) and the generated tensors' inner dimensions ``[D'_(b-1), ..., D'_0]`` (``None``
    entries depend on the data, bounded by :meth:`max_inner`).
    """
    b = 0

    def infer(self, elem_type):
        raise NotImplementedError(type(self).__name__)

    def max_per_elem(self, elem_type):
        """A bound of the pieces per element when :meth:`infer` says ``None``."""
        return None

    def max_inner(self, elem_type):
        """Bounds of the inner dimensions that :meth:`infer` gives as ``None``."""
        return ()

    @property
    def params(self):
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.name}({args})"


class RetileRows(StreamFunction):
    """Split an ``[R, C]`` tile into its ``R`` rows (``[1, C]`` tiles), in order.

    With ``valid=True`` the element is a pair ``(tile, n)`` of a tile and an ``Index`` and only
    the first ``n`` rows are emitted (padding rows are dropped); ``n > R`` is a run-time error.
    With ``b=0`` (the paper's form) the rows join the input's innermost fibre; with ``b=1`` each
    tile's rows form a fibre of their own (one more level).
    """
    name = "retile_rows"

    def __init__(self, valid=False, b=0):
        if b not in (0, 1):
            raise StepShapeError(f"{self.name} generates rank-0 or rank-1 sub-streams, not b = {b!r}")
        self.valid = bool(valid)
        self.b = b

    @property
    def params(self):
        p = {"valid": True} if self.valid else {}
        if self.b:
            p["b"] = self.b
        return p

    def _tile(self, t):
        if self.valid:
            if not (isinstance(t, Tuple) and len(t.elems) == 2 and isinstance(t.elems[0], Tile)
                    and isinstance(t.elems[1], Index)):
                raise StepTypeError(f"{self.name}(valid=True) needs (Tile, Index) pairs, got {t!r}")
            return t.elems[0]
        if not isinstance(t, Tile):
            raise StepTypeError(f"{self.name} needs tiles, got {t!r}")
        return t

    def _split(self, t):
        """``(piece type, number of pieces)`` of a tile type."""
        return Tile(t.dtype, 1, t.cols), t.rows

    def infer(self, elem_type):
        piece, n = self._split(self._tile(elem_type))
        count = None if self.valid else n
        if self.b == 0:
            return piece, count, ()
        return piece, 1, (count,)

    def max_per_elem(self, elem_type):
        return self._split(self._tile(elem_type))[1] if self.b == 0 else 1

    def max_inner(self, elem_type):
        return (self._split(self._tile(elem_type))[1],) if self.b else ()


class RetileCols(RetileRows):
    """Split an ``[R, C]`` tile into its ``C`` columns (``[R, 1]`` tiles), in order; with
    ``valid=True`` only the first ``n`` columns; ``b`` as for :class:`RetileRows`."""
    name = "retile_cols"

    def _split(self, t):
        return Tile(t.dtype, t.rows, 1), t.cols


class KeepIf(StreamFunction):
    """Keep the element of a pair ``(x, flag)`` when ``flag == keep``, else drop it.

    ``keep_if(keep=False)`` on Reshape's padding flags drops the padded elements.
    """
    name = "keep_if"

    def __init__(self, keep=True):
        self.keep = bool(keep)

    @property
    def params(self):
        return {"keep": self.keep}

    def infer(self, elem_type):
        t = elem_type
        if not (isinstance(t, Tuple) and len(t.elems) == 2 and isinstance(t.elems[1], Bool)):
            raise StepTypeError(f"{self.name} needs (element, Bool) pairs, got {t!r}")
        return t.elems[0], None, ()

    def max_per_elem(self, elem_type):
        return 1


class AddrGen(StreamFunction):
    """Expand a value ``v`` into a rank-``b`` sub-stream of ``Index`` addresses.

    ``shape`` (``b + 1`` positive ints, outermost first) is the generated sub-stream's shape: its
    first entry counts the tensors each element yields. The address at multi-index ``i`` is
    ``offset + scale * v + sum(i[k] * strides[k])``; stops come from the walk over ``shape``
    (innermost fastest). ``v`` is an ``Index``, the set bit of a one-hot ``Select`` (an expert
    id) or the value of an integer ``[1, 1]`` tile.

    With ``counted=True`` the element is a pair ``(v, n)`` of such a value and an ``Index``, and
    the innermost dimension of the walk stops after ``n`` indices (``0 <= n <= shape[-1]``; more
    is a run-time error): a ragged range of addresses per element, e.g. the ``L_b`` keys of a
    request from its base address. ``n = 0`` generates no address: with ``b = 0`` the element
    yields nothing, with ``b >= 1`` each innermost fibre of the walk is empty (a stop only).
    """
    name = "addr_gen"

    def __init__(self, shape, strides, *, scale=1, offset=0, counted=False):
        shape, strides = tuple(shape), tuple(strides)
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise StepShapeError(f"addr_gen needs a shape of positive ints, got {list(shape)}")
        if len(strides) != len(shape) or not all(isinstance(s, int) and not isinstance(s, bool)
                                                 for s in strides):
            raise StepShapeError(f"addr_gen needs one int stride per dimension: shape "
                                 f"{list(shape)} vs strides {list(strides)}")
        for what, v in (("scale", scale), ("offset", offset)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise StepTypeError(f"addr_gen needs an int {what}, not {v!r}")
        self.shape, self.strides, self.scale, self.offset = shape, strides, scale, offset
        self.counted = bool(counted)
        self.b = len(shape) - 1

    @property
    def params(self):
        p = {"shape": list(self.shape), "strides": list(self.strides), "scale": self.scale,
             "offset": self.offset}
        if self.counted:
            p["counted"] = True
        return p

    def infer(self, elem_type):
        t = elem_type
        if self.counted:
            if not (isinstance(t, Tuple) and len(t.elems) == 2 and isinstance(t.elems[1], Index)):
                raise StepTypeError(f"{self.name}(counted=True) needs (value, Index) pairs, "
                                    f"got {t!r}")
            t = t.elems[0]
        ok = isinstance(t, (Index, Select)) or (isinstance(t, Tile) and not t.dtype.is_float
                                                and dim_eq(t.rows, 1) and dim_eq(t.cols, 1))
        if not ok:
            raise StepTypeError(f"{self.name} needs Index, Select or integer [1, 1] tile "
                                f"elements, got {t!r}")
        if not self.counted:
            return Index(), self.shape[0], self.shape[1:]
        if self.b == 0:
            return Index(), None, ()
        return Index(), self.shape[0], self.shape[1:-1] + (None,)

    def max_per_elem(self, elem_type):
        return self.shape[0]

    def max_inner(self, elem_type):
        return self.shape[1:]


def retile_rows(*, valid=False, b=0):
    return RetileRows(valid, b)


def retile_cols(*, valid=False, b=0):
    return RetileCols(valid, b)


def keep_if(keep=True):
    return KeepIf(keep)


def addr_gen(shape, strides, *, scale=1, offset=0, counted=False):
    return AddrGen(shape, strides, scale=scale, offset=offset, counted=counted)


retile_rows.__doc__ = RetileRows.__doc__
retile_cols.__doc__ = RetileCols.__doc__
keep_if.__doc__ = KeepIf.__doc__
addr_gen.__doc__ = AddrGen.__doc__
