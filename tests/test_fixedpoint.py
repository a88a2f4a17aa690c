"""Fixed-point exp, silu and rsqrt on int8/int16 tiles: tables, exact points, whole-domain
accuracy, and their place in the type rules and the reference arithmetic."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler import functions as F
from stepforge.compiler.errors import StepTypeError
from stepforge.compiler.ops.compute import Map
from stepforge.compiler.types import Tile, bf16, int8, int16, int32
from stepforge.contract import arith as A
from stepforge.contract import fixedpoint as FP

from .helpers import run_op


def _benchmark():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "nonlinear.py"
    spec = importlib.util.spec_from_file_location("nonlinear_benchmark", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def q(dtype, *reals):
    return FP.from_real(np.array(reals), dtype)


class TestTables:
    def test_shapes_and_endpoints(self):
        for dtype in (int8, int16):
            for name in FP.NAMES:
                k, t = FP.table(name, dtype)
                s = FP.spec(name, dtype)
                assert (k, t) == (s.index_bits, s.table)
                assert all(isinstance(v, int) for v in t)
                assert len(t) == ((1 << k) + 1) * (2 if name == "rsqrt" else 1)
            e = FP.spec("exp", dtype)
            assert e.table[0] == 1 << e.precision and e.table[-1] == 2 << e.precision  # 2**0, 2**1
            r = FP.spec("rsqrt", dtype)
            assert r.table[0] == 1 << r.precision  # 1 / sqrt(1)
            assert FP.spec("silu", dtype).table[0] == 0

    def test_tables_are_monotonic(self):
        for dtype in (int8, int16):
            assert np.all(np.diff(FP.spec("exp", dtype).table) > 0)
            assert np.all(np.diff(FP.spec("silu", dtype).table) > 0)
            k = FP.spec("rsqrt", dtype).index_bits
            t = np.array(FP.spec("rsqrt", dtype).table)
            half = (1 << k) + 1
            assert np.all(np.diff(t[:half]) < 0) and np.all(np.diff(t[half:]) < 0)

    def test_known_values(self):
        # exp table of int16: 2 ** (i / 64) * 2 ** 18 rounded half-to-even
        assert FP.spec("exp", int16).table[32] == round(2 ** 0.5 * 2 ** 18)
        assert FP.spec("exp", int16).log2e == round(1.4426950408889634 * 2 ** 20)
        assert FP.FRAC_BITS == {int8: 4, int16: 8}

    def test_only_int8_and_int16(self):
        for bad in (int32, bf16):
            with pytest.raises(ValueError, match=r"int8 \(Q4\.4\) and int16 \(Q8\.8\)"):
                FP.spec("exp", bad)
        with pytest.raises(ValueError, match="no fixed-point form of 'tanh'"):
            FP.table("tanh", int16)
        assert FP.supports(int8) and FP.supports(int16) and not FP.supports(int32)


class TestValues:
    def test_exact_points(self):
        for dtype in (int8, int16):
            one = 1 << FP.FRAC_BITS[dtype]
            assert FP.evaluate_q("exp", [0], dtype)[0] == one
            assert FP.evaluate_q("silu", [0], dtype)[0] == 0
            assert list(FP.evaluate_q("rsqrt", [one, 4 * one], dtype)) == [one, one // 2]

    def test_saturation_and_edges(self):
        for dtype in (int8, int16):
            ev = lambda n, x: FP.evaluate_q(n, np.array(x), dtype).tolist()  # noqa: E731
            assert ev("exp", [dtype.max, dtype.min]) == [dtype.max, 0]
            assert ev("rsqrt", [0, -1, dtype.min]) == [dtype.max] * 3
            assert ev("silu", [dtype.min]) == [0]  # silu(-8) or silu(-128) rounds to 0
            assert ev("silu", [dtype.max]) == [dtype.max]

    def test_shape_and_dtype_kept(self):
        x = np.arange(-8, 8, dtype=np.int16).reshape(4, 4) * 100
        for name in FP.NAMES:
            y = FP.evaluate_q(name, x, int16)
            assert y.shape == (4, 4) and y.dtype == np.int16
            assert np.array_equal(y.reshape(-1), FP.evaluate_q(name, x.reshape(-1), int16))

    def test_out_of_range_refused(self):
        with pytest.raises(ValueError, match="outside the int8 range"):
            FP.evaluate_q("exp", [200], int8)

    def test_monotonic_on_the_whole_domain(self):
        x16 = np.arange(-32768, 32768)
        assert np.all(np.diff(FP.evaluate_q("exp", x16, int16).astype(np.int64)) >= 0)
        pos = np.arange(1, 32768)
        assert np.all(np.diff(FP.evaluate_q("rsqrt", pos, int16).astype(np.int64)) <= 0)
        up = np.arange(-300, 32768)  # silu increases from about -1.28
        assert np.all(np.diff(FP.evaluate_q("silu", up, int16).astype(np.int64)) >= 0)

    def test_real_conversions(self):
        assert q(int16, 1.0, -0.5, 1000.0).tolist() == [256, -128, 32767]
        assert FP.to_real(np.array([256, -128]), int16).tolist() == [1.0, -0.5]


def test_accuracy_over_the_whole_domain():
    """Measured by benchmarks/nonlinear.py: every result within 0.51 LSB (int8) / 0.8 LSB (int16)
    of the exact value, i.e. at most one LSB from correct rounding."""
    bench = _benchmark()
    for dtype, limit in ((int8, 0.51), (int16, 0.8)):
        for name in FP.NAMES:
            r = bench.measure(name, dtype)
            assert r["max"] < limit, (dtype, name, r)
            assert r["mean"] < 0.25, (dtype, name, r)
            assert r["exact"] >= 0.99 * r["inputs"], (dtype, name, r)


class TestLanguageAndReference:
    def test_type_rules(self):
        for dtype in (int8, int16):
            for fn in (F.exp, F.silu, F.rsqrt):
                assert fn.infer(Tile(dtype, 4, 4)) == Tile(dtype, 4, 4)
        with pytest.raises(StepTypeError, match=r"silu needs a float tile \(bf16 or fp32\), got "
                           r"Tile\(int32, 2, 2\) \[2, 2\]; on integers it exists in fixed point "
                           r"for int8 \(Q4\.4\) and int16 \(Q8\.8\) only"):
            F.silu.infer(Tile(int32, 2, 2))
        assert F.exp.flops(Tile(int16, 2, 2)) == 16 and F.silu.flops(Tile(int8, 2, 2)) == 32

    def test_arith_uses_the_fixed_point_form(self):
        x = np.array([[-300, -1, 0, 1], [256, 700, 2000, -32768]], np.int16)
        for name in FP.NAMES:
            assert np.array_equal(getattr(A, name)(x), FP.evaluate_q(name, x, int16))
        assert A.exp(q(int8, 1.0).reshape(1, 1))[0, 0] == round(np.e * 16)
        with pytest.raises(A.ArithError, match="exp needs a float tile, got int32"):
            A.exp(np.zeros((1, 1), np.int32))

    def test_traced_function_and_interpreter(self):
        softmax = F.function(lambda s: (s - s.row_max()).exp())
        x = np.array([[0, 256, -256]], np.int16)
        got = A.evaluate(softmax, x)
        assert got.tolist() == [[94, 256, 35]]  # exp(-1), exp(0), exp(-2) in Q8.8
        out = run_op(lambda s: Map(softmax, s), ([[x, x]], 1), dtype=Tile(int16, 1, 3))[0]
        assert len(out) == 1 and all(np.array_equal(v, got) for v in out[0])


@pytest.mark.parametrize("dtype", [int8, int16])
@pytest.mark.parametrize("name", FP.NAMES)
def test_the_final_clamp_never_fires(name, dtype):
    # the hardware lanes build the clamp only for a side the contract crosses; today none
    s = FP.spec(name, dtype)
    lo, hi = FP.unclamped_range(name, dtype)
    assert s.min <= lo <= hi <= s.max
    x = np.arange(s.min, s.max + 1)
    assert np.array_equal(FP._EVAL[name](s, x), FP.evaluate_q(name, x, dtype))
