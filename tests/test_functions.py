"""The tile-function library: tracing, type rules, FLOPs and the stream functions."""

import pytest
import sympy

from stepforge.compiler import functions as F
from stepforge.compiler.errors import StepShapeError, StepTypeError
from stepforge.compiler.types import Bool, Index, Select, Tile, Tuple, bf16, fp32, int8, int32

T = Tile(bf16, 16, 64)


class TestTracing:
    def test_repr_of_a_traced_function(self):
        f = F.function(lambda x, w1, w3: F.silu(x @ w1) * (x @ w3))
        assert repr(f) == "fn(x, w1, w3) = (silu((x @ w1)) * (x @ w3))"

        @F.function
        def attn(q, k):
            return (q @ k.T).exp().row_sum()
        assert repr(attn) == "attn(q, k) = row_sum(exp((q @ k.T)))"

    def test_library_reprs(self):
        assert [repr(f) for f in (F.add, F.exp, F.retile_row)] == ["add", "exp", "retile_row"]
        assert repr(F.matmul(transpose_b=True, out=fp32)) == "matmul(transpose_b=True, out=fp32)"
        assert repr(F.scale(0.125)) == "scale(0.125)"
        assert repr(F.cast(int8, saturate=True)) == "cast(int8, saturate=True)"

    def test_primitive_and_ops(self):
        assert F.add.primitive == "add" and F.matmul().primitive == "matmul"
        f = F.function(lambda a, b: F.silu(a @ b) * (a @ b))
        assert f.primitive is None and f.ops == ("matmul", "silu", "mul")
        assert F.function(lambda a, b: F.add(b, a)).primitive is None

    def test_calling_a_function_inlines_it(self):
        sq = F.function(lambda x: x * x)
        f = F.function(lambda a: sq(a) + 1)
        assert repr(f) == "fn(a) = ((a * a) + 1)"

    def test_misuse_is_refused(self):
        with pytest.raises(TypeError, match="no truth value"):
            F.function(lambda x: x if x else x)
        with pytest.raises(TypeError, match=r"transpose \(\.T\) is only allowed as the right operand of @"):
            F.function(lambda a, b: a + b.T)
        with pytest.raises(TypeError, match="must return a traced value"):
            F.function(lambda x: 3)
        with pytest.raises(TypeError, match="plain positional parameters"):
            F.function(lambda x, *rest: x)


class TestTypes:
    def test_elementwise_broadcast(self):
        assert F.sub.infer(T, Tile(bf16, 16, 1)) == T
        assert F.mul.infer(Tile(fp32, 1, 8), Tile(fp32, 4, 1)) == Tile(fp32, 4, 8)
        R = sympy.Symbol("R", integer=True, nonnegative=True)
        assert F.div.infer(Tile(fp32, R, 8), Tile(fp32, 1, 8)) == Tile(fp32, R, 8)

    def test_elementwise_errors_name_both_shapes_and_the_argument(self):
        with pytest.raises(StepShapeError, match=r"^add needs operands of one shape or with "
                           r"size-1 dimensions to broadcast: \[16, 64\] vs \[16, 32\]") as e:
            F.add.infer(T, Tile(bf16, 16, 32))
        assert e.value.arg == 1
        with pytest.raises(StepTypeError, match=r"needs operands of one dtype: Tile\(bf16, 16, 64\) "
                           r"\[16, 64\] vs Tile\(fp32, 16, 64\) \[16, 64\] \(cast one of them\)"):
            F.add.infer(T, Tile(fp32, 16, 64))

    def test_matmul_shapes(self):
        assert F.matmul().infer(Tile(bf16, 16, 64), Tile(bf16, 64, 32)) == Tile(bf16, 16, 32)
        assert F.matmul(transpose_b=True).infer(Tile(bf16, 16, 64), Tile(bf16, 8, 64)) == Tile(bf16, 16, 8)
        assert F.matmul(out=fp32).infer(T, Tile(bf16, 64, 4)) == Tile(fp32, 16, 4)
        with pytest.raises(StepShapeError, match=r"matmul: a @ b needs a's columns to equal b's "
                           r"rows: \[16, 64\] vs \[32, 64\]"):
            F.matmul().infer(T, Tile(bf16, 32, 64))
        with pytest.raises(StepTypeError, match="matmul of bf16 tiles cannot produce int32"):
            F.matmul(out=int32).infer(T, Tile(bf16, 64, 4))

    def test_mac(self):
        acc = Tile(fp32, 16, 8)
        assert F.mac(transpose_b=True).infer(acc, T, Tile(bf16, 8, 64)) == acc
        with pytest.raises(StepShapeError, match=r"the accumulator \[16, 8\] must have the shape of "
                           r"the product \[16, 4\]"):
            F.mac().infer(acc, T, Tile(bf16, 64, 4))

    def test_error_blames_the_parameter_behind_the_operand(self):
        f = F.function(lambda x, w1, w3: F.silu(x @ w1) * (x @ w3))
        with pytest.raises(StepShapeError, match=r"\[16, 32\] vs \[16, 16\]") as e:
            f.infer(T, Tile(bf16, 64, 32), Tile(bf16, 64, 16))
        assert e.value.arg == 2

    def test_float_only_primitives(self):
        with pytest.raises(StepTypeError, match=r"exp needs a float tile \(bf16 or fp32\), got "
                           r"Tile\(int32, 2, 2\) \[2, 2\]"):
            F.exp.infer(Tile(int32, 2, 2))

    def test_rows_cast_retile(self):
        assert F.row_max.infer(T) == Tile(bf16, 16, 1)
        assert F.cast(fp32).infer(T) == Tile(fp32, 16, 64)
        assert F.retile_row.infer(Tile(bf16, 3, 64), Tile(bf16, 1, 64)) == Tile(bf16, 4, 64)
        assert F.retile_col.infer(Tile(bf16, 3, 2), Tile(bf16, 3, 1)) == Tile(bf16, 3, 3)
        with pytest.raises(StepShapeError, match=r"retile_row stacks rows of one width: \[3, 64\] vs \[1, 32\]"):
            F.retile_row.infer(Tile(bf16, 3, 64), Tile(bf16, 1, 32))

    def test_constants(self):
        assert F.function(lambda x: x * 0.5).infer(T) == T
        assert F.scale(3).infer(Tile(int8, 2, 2)) == Tile(int8, 2, 2)
        with pytest.raises(StepTypeError, match=r"constant 0.5 is not an int8 value \(-128..127\)"):
            F.scale(0.5).infer(Tile(int8, 2, 2))
        with pytest.raises(StepTypeError, match="constant 200 is not an int8 value"):
            F.function(lambda x: x + 200).infer(Tile(int8, 2, 2))

    def test_tuples(self):
        f = F.function(lambda s, x: (F.maximum(s[0], x.row_max()), s[1] + x))
        st = Tuple(Tile(fp32, 4, 1), Tile(fp32, 4, 8))
        assert f.infer(st, Tile(fp32, 4, 8)) == st
        with pytest.raises(StepTypeError, match=r"field \[2\] of Tuple\(Tile\(fp32, 4, 1\), "
                           r"Tile\(fp32, 4, 8\)\): a tuple of 2 fields"):
            F.function(lambda s: s[2]).infer(st)

    def test_arity(self):
        with pytest.raises(StepTypeError, match="add takes 2 arguments, got 1"):
            F.add.infer(T)


class TestMetrics:
    def test_flops(self):
        R = sympy.Symbol("R", integer=True, nonnegative=True)
        a, w = Tile(bf16, R, 64), Tile(bf16, 64, 32)
        f = F.function(lambda x, w1, w3: F.silu(x @ w1) * (x @ w3))
        # two matmuls 2*R*64*32, silu 8 per element, mul 1 per element
        assert sympy.simplify(f.flops(a, w, w) - (2 * 2 * R * 64 * 32 + 8 * R * 32 + R * 32)) == 0
        assert F.exp.flops(T) == 4 * 16 * 64 and F.rsqrt.flops(T) == 4 * 16 * 64
        assert F.row_sum.flops(T) == 16 * 64 and F.cast(fp32).flops(T) == 0
        assert F.retile_row.flops(Tile(bf16, 0, 8), Tile(bf16, 1, 8)) == 0
        assert F.mac().flops(Tile(fp32, 16, 4), T, Tile(bf16, 64, 4)) == 2 * 16 * 64 * 4

    def test_matmuls(self):
        f = F.function(lambda x, w: F.silu(x @ w.T))
        assert f.matmuls(T, Tile(bf16, 8, 64)) == [(T, Tile(bf16, 8, 64), Tile(bf16, 16, 8))]

    def test_accum_type_of_retiling(self):
        B = sympy.Symbol("B", integer=True, nonnegative=True)
        assert F.retile_row.accum_type(Tile(bf16, 0, 8), Tile(bf16, 1, 8), B) == Tile(bf16, B, 8)
        assert F.retile_col.accum_type(Tile(bf16, 4, 0), Tile(bf16, 4, 2), 3) == Tile(bf16, 4, 6)


class TestInits:
    def test_kinds(self):
        assert repr(F.zeros(Tile(fp32, 2, 2))) == "full(Tile(fp32, 2, 2), 0)"
        assert repr(F.empty_rows(bf16, 8)) == "empty(Tile(bf16, 0, 8))"
        assert F.as_init(1.5, Tile(fp32, 1, 1)).fill == 1.5
        assert F.as_init((F.zeros(Tile(fp32, 1, 1)), F.empty_cols(int8, 2))).type == \
            Tuple(Tile(fp32, 1, 1), Tile(int8, 2, 0))

    def test_errors(self):
        with pytest.raises(StepShapeError, match=r"full\(\) needs a static tile shape, got \[R, 2\]"):
            F.zeros(Tile(fp32, sympy.Symbol("R"), 2))
        with pytest.raises(StepTypeError, match=r"full\(\): 300 is not an int8 value"):
            F.full(Tile(int8, 1, 1), 300)
        with pytest.raises(StepTypeError, match="a number as init needs a tile stream"):
            F.as_init(0, Index())


class TestStreamFunctions:
    def test_retile(self):
        assert F.retile_rows().infer(Tile(bf16, 16, 8)) == (Tile(bf16, 1, 8), 16, ())
        assert F.retile_cols().infer(Tile(bf16, 16, 8)) == (Tile(bf16, 16, 1), 8, ())
        out, per, inner = F.retile_rows(valid=True).infer(Tuple(Tile(bf16, 16, 8), Index()))
        assert (out, per) == (Tile(bf16, 1, 8), None)
        with pytest.raises(StepTypeError, match=r"retile_rows\(valid=True\) needs \(Tile, Index\) pairs"):
            F.retile_rows(valid=True).infer(Tile(bf16, 16, 8))

    def test_keep_if_and_addr_gen(self):
        assert F.keep_if().infer(Tuple(Index(), Bool())) == (Index(), None, ())
        g = F.addr_gen([4, 2, 3], [6, 3, 1], scale=24)
        assert g.b == 2 and g.infer(Select(8)) == (Index(), 4, (2, 3))
        assert repr(g) == "addr_gen(shape=[4, 2, 3], strides=[6, 3, 1], scale=24, offset=0)"
        with pytest.raises(StepShapeError, match=r"one int stride per dimension: shape \[4, 2\] vs strides \[1\]"):
            F.addr_gen([4, 2], [1])
        with pytest.raises(StepTypeError, match=r"needs Index, Select or integer \[1, 1\] tile elements"):
            g.infer(Tile(fp32, 1, 1))
