"""The arithmetic contract (docs/arithmetic.md): hand-worked bit patterns and properties checked
against independent references (Python floats, exact rationals, Python integers)."""

import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.types import Tile, bf16, fp32, int8, int16, int32
from stepforge.contract import arith as A


def f32(*v):
    return np.array([v], np.float32)


def b16(*v):
    return np.array([v], np.float32).astype(ml_dtypes.bfloat16)


def bits32(x):
    return [int(b) for b in A.fp32_bits(x).reshape(-1)]


def bits16(x):
    return [int(b) for b in A.bf16_bits(x).reshape(-1)]


def from32(*bits):
    return A.from_fp32_bits(np.array([bits], np.uint32))


def from16(*bits):
    return A.from_bf16_bits(np.array([bits], np.uint16))


# -- independent references ----------------------------------------------------------------------

def ref_round_f32(x):
    """A Python float (binary64) to the nearest binary32 (ties to even), by the C conversion."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def ref_round_bf16(q):
    """An exact rational to the nearest bf16 (ties to even), normal range only; None outside."""
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    # q in [2^e, 2^(e+1)); 8 significant bits: quantum 2^(e-7)
    if e < -126 or e > 127:
        return None
    quantum = Fraction(2) ** (e - 7)
    m = q / quantum
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = n * quantum
    if v >= Fraction(2) ** 128:
        return None
    return sign * float(v)


finite_f32 = st.integers(0, 0xFFFFFFFF).filter(lambda u: (u & 0x7F800000) != 0x7F800000)
finite_bf16 = st.integers(0, 0xFFFF).filter(lambda u: (u & 0x7F80) != 0x7F80)


# -- rounding to bf16 ----------------------------------------------------------------------------

class TestRoundBf16:
    def test_ties_go_to_even(self):
        # 1 + 2^-8 is halfway between 1 (0x3F80) and 1 + 2^-7 (0x3F81): even is 0x3F80
        assert bits16(A.round_bf16(f32(1 + 2 ** -8))) == [0x3F80]
        # 1 + 3*2^-8 is halfway between 0x3F81 and 0x3F82: even is 0x3F82
        assert bits16(A.round_bf16(f32(1 + 3 * 2 ** -8))) == [0x3F82]
        # just above a tie rounds up
        assert bits16(A.round_bf16(from32(0x3F808001))) == [0x3F81]

    def test_overflow_subnormals_nan(self):
        assert bits16(A.round_bf16(from32(0x7F7FFFFF))) == [0x7F80]      # to +inf
        assert bits16(A.round_bf16(from32(0xFF7FFFFF))) == [0xFF80]      # to -inf
        assert bits16(A.round_bf16(from32(0x00008000))) == [0x0000]      # subnormal tie, even
        assert bits16(A.round_bf16(from32(0x00018000))) == [0x0002]
        assert bits16(A.round_bf16(from32(0x7F800001, 0xFFC12345))) == [0x7FC0, 0x7FC0]

    @settings(deadline=None, max_examples=300)
    @given(st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=64))
    def test_agrees_with_ml_dtypes_on_non_nan(self, words):
        x = A.from_fp32_bits(np.array(words, np.uint32))
        ok = ~np.isnan(x)
        ours = A.bf16_bits(A.round_bf16(x))[ok]
        theirs = x[ok].astype(ml_dtypes.bfloat16).view(np.uint16)
        assert ours.tolist() == theirs.tolist()


# -- fp32 and bf16 elementwise -------------------------------------------------------------------

class TestFloatElementwise:
    @settings(deadline=None, max_examples=400)
    @given(finite_f32, finite_f32, st.sampled_from(["add", "sub", "mul", "div"]))
    def test_fp32_is_ieee_round_to_nearest(self, ua, ub, op):
        a, b = from32(ua), from32(ub)
        fa, fb = float(a[0, 0]), float(b[0, 0])
        if op == "div" and fb == 0:
            return
        exact = {"add": lambda: fa + fb, "sub": lambda: fa - fb, "mul": lambda: fa * fb,
                 "div": lambda: fa / fb}[op]()
        # binary64 then binary32 is correctly rounded for + - * / of binary32 (53 >= 2*24 + 2)
        got = float(getattr(A, op)(a, b)[0, 0])
        want = ref_round_f32(exact)
        assert struct.pack("<f", got) == struct.pack("<f", want) or (got == want == 0 and exact == 0)

    @settings(deadline=None, max_examples=400)
    @given(finite_bf16, finite_bf16, st.sampled_from(["add", "sub", "mul", "div"]))
    def test_bf16_is_correctly_rounded_on_normal_results(self, ua, ub, op):
        a, b = from16(ua), from16(ub)
        qa, qb = Fraction(float(a[0, 0])), Fraction(float(b[0, 0]))
        if op == "div" and qb == 0:
            return
        exact = {"add": lambda: qa + qb, "sub": lambda: qa - qb, "mul": lambda: qa * qb,
                 "div": lambda: qa / qb}[op]()
        want = ref_round_bf16(exact)
        if want is None or (exact != 0 and abs(exact) < Fraction(2) ** -126):
            return  # overflow or subnormal: outside the reference's range
        got = float(getattr(A, op)(a, b)[0, 0])
        assert got == want

    def test_canonical_nan(self):
        assert bits32(A.add(f32(np.inf), f32(-np.inf))) == [0x7FC00000]
        assert bits32(A.mul(from32(0xFFC12345), f32(1))) == [0x7FC00000]
        assert bits16(A.div(b16(0), b16(0))) == [0x7FC0]

    def test_subnormals_are_kept(self):
        tiny = from32(1)  # 2^-149
        assert bits32(A.add(tiny, tiny)) == [2]
        assert bits32(A.mul(from32(0x00800000), f32(0.5))) == [0x00400000]

    def test_broadcast_of_size_one_dimensions(self):
        x = np.array([[1, 2], [3, 4]], np.float32)
        assert A.sub(x, np.array([[1], [3]], np.float32)).tolist() == [[0, 1], [0, 1]]
        assert A.mul(x, np.array([[10, 100]], np.float32)).tolist() == [[10, 200], [30, 400]]

    def test_maximum_orders_signed_zeros_and_propagates_nan(self):
        assert bits32(A.maximum(f32(-0.0, 0.0), f32(0.0, -0.0))) == [0, 0]
        assert bits32(A.maximum(f32(-0.0), f32(-0.0))) == [0x80000000]
        assert bits32(A.maximum(f32(np.nan, 1), f32(1, np.nan))) == [0x7FC00000] * 2
        assert A.maximum(f32(-3, 2.5), f32(-4, 7)).tolist() == [[-3, 7]]


# -- integers ------------------------------------------------------------------------------------

def wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class TestIntegers:
    @settings(deadline=None, max_examples=300)
    @given(st.sampled_from([int8, int16, int32]).flatmap(
        lambda d: st.tuples(st.just(d), st.integers(d.min, d.max), st.integers(d.min, d.max))),
        st.sampled_from(["add", "sub", "mul"]))
    def test_wrap_modulo_two_to_the_bits(self, case, op):
        d, a, b = case
        exact = {"add": a + b, "sub": a - b, "mul": a * b}[op]
        got = getattr(A, op)(np.array([[a]], d.np), np.array([[b]], d.np))
        assert got.dtype == d.np and int(got[0, 0]) == wrap(exact, d.bits)

    def test_division_rules(self):
        a = np.array([[7, -7, 7, -7, 5, -128, -128, 0]], np.int8)
        b = np.array([[2, 2, -2, -2, 0, -1, 0, 0]], np.int8)
        assert A.div(a, b).tolist() == [[3, -3, -3, 3, -1, -128, -1, -1]]

    @settings(deadline=None, max_examples=200)
    @given(st.integers(int32.min, int32.max), st.integers(int32.min, int32.max).filter(bool))
    def test_division_truncates_toward_zero(self, a, b):
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        got = A.div(np.array([[a]], np.int32), np.array([[b]], np.int32))
        assert int(got[0, 0]) == wrap(q, 32)

    def test_reductions(self):
        x = np.array([[100, 100, -50], [127, 1, 0]], np.int8)
        assert A.row_sum(x).tolist() == [[-106], [-128]]  # 150 and 128 wrap
        assert A.row_max(x).tolist() == [[100], [127]]
        assert A.row_max(np.zeros((2, 0), np.int16)).tolist() == [[-32768], [-32768]]


# -- matmul, mac and sums ------------------------------------------------------------------------

class TestMatmul:
    def test_one_running_sum_in_k_order(self):
        a = f32(1e8, 1, -1e8)
        assert A.matmul(a, np.ones((3, 1), np.float32)).tolist() == [[0.0]]
        assert A.row_sum(a).tolist() == [[0.0]]

    def test_sum_starts_at_positive_zero(self):
        a = f32(-0.0, -0.0)
        assert bits32(A.matmul(a, np.ones((2, 1), np.float32))) == [0]
        assert bits32(A.row_sum(a)) == [0]

    def test_bf16_accumulates_in_fp32_and_rounds_once(self):
        # fp32 sum 1 + 3*2^-8 rounds (a tie) to 1 + 2^-6; rounding every step to bf16 gives 1.0
        a = b16(1, 2 ** -8, 2 ** -8, 2 ** -8)
        b = np.ones((4, 1), np.float32).astype(ml_dtypes.bfloat16)
        r = A.matmul(a, b)
        assert r.dtype == ml_dtypes.bfloat16 and float(r[0, 0]) == 1 + 2 ** -6
        assert float(A.matmul(a, b, out=fp32)[0, 0]) == 1 + 3 * 2 ** -8

    def test_transpose_b(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.arange(12, dtype=np.float32).reshape(4, 3)
        assert A.matmul(a, b, transpose_b=True).tolist() == (a @ b.T).tolist()

    def test_integers_exact_then_wrapped(self):
        a = np.full((1, 4), 127, np.int8)
        b = np.full((4, 1), 127, np.int8)
        assert A.matmul(a, b).tolist() == [[4 * 127 * 127]]  # integers default to int32
        assert A.matmul(a, b).dtype == np.int32
        assert A.matmul(a, b, out=int8).tolist() == [[wrap(4 * 127 * 127, 8)]]
        big = np.full((1, 2), 2 ** 30, np.int32)
        assert A.matmul(big, np.full((2, 1), 4, np.int32)).tolist() == [[0]]  # 2^33 wraps

    @settings(deadline=None, max_examples=100)
    @given(st.integers(1, 4), st.integers(0, 5), st.integers(1, 4), st.integers(0, 2 ** 32 - 1))
    def test_matmul_is_mac_from_zero(self, m, k, n, seed):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        zero = np.zeros((m, n), np.float32)
        assert A.matmul(a, b).tobytes() == A.mac(zero, a, b).tobytes()
        # and the running sum is the sequential fp32 loop
        want = np.zeros((m, n), np.float32)
        for i in range(k):
            want = want + np.outer(a[:, i], b[i, :]).astype(np.float32)
        assert A.matmul(a, b).tobytes() == want.tobytes()

    def test_mac_continues_the_running_sum(self):
        acc = f32(1e8)
        assert A.mac(acc, f32(1, -1e8), np.ones((2, 1), np.float32)).tolist() == [[0.0]]
        with pytest.raises(A.ArithError, match=r"accumulator of shape \[1, 1\] for a product of shape \[1, 2\]"):
            A.mac(acc, f32(1), f32(1, 2))

    def test_operand_mismatch_is_an_error(self):
        with pytest.raises(A.ArithError, match=r"a @ b with a of shape \[1, 3\] and b of shape \[2, 1\]"):
            A.matmul(np.zeros((1, 3), np.float32), np.zeros((2, 1), np.float32))


# -- exp, silu, rsqrt ----------------------------------------------------------------------------

class TestTranscendental:
    def test_exp_golden_bits(self):
        # the fixed operation sequence of docs/arithmetic.md section 3, as hardware test vectors
        x = f32(0, 1, -1, 0.5, -10, 10, 88.7, -103, 1e-3)
        golden = ["0x3f800000", "0x402df854", "0x3ebc5ab2", "0x3fd3094c", "0x383e6bce",
                  "0x46ac14ee", "0x7f7a37fc", "0x1", "0x3f8020c9"]
        assert [hex(b) for b in bits32(A.exp(x))] == golden
        # on these arguments the sequence happens to give the correctly rounded exp
        assert [hex(b) for b in bits32(np.exp(x.astype(np.float64)).astype(np.float32))] == golden

    def test_exp_edges(self):
        assert bits32(A.exp(f32(np.inf, -np.inf, 89, -104, np.nan))) == [
            0x7F800000, 0, 0x7F800000, 0, 0x7FC00000]

    def test_exp_within_one_ulp(self):
        x = np.random.default_rng(1).uniform(-87, 88, (200, 100)).astype(np.float32)
        got = A.exp(x).astype(np.float64)
        ref = np.exp(x.astype(np.float64))
        ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(got - ref) / ulp) < 1.0

    def test_bf16_exp_is_correctly_rounded_on_every_input(self):
        x = A.from_bf16_bits(np.arange(0x10000, dtype=np.uint16)).reshape(256, 256)
        with np.errstate(all="ignore"):
            x64 = A.widen(x).astype(np.float64)
            ref = np.exp(x64)
        ok = np.isfinite(x64) & (ref < 3e38) & (ref > 1.2e-38)
        with np.errstate(all="ignore"):
            want = A.round_bf16(ref.astype(np.float32))
        assert np.array_equal(A.bf16_bits(A.exp(x))[ok], A.bf16_bits(want)[ok])

    def test_silu(self):
        got = A.silu(f32(0, 1, -1, 20, -20, -200, np.inf, -np.inf))
        assert [hex(b) for b in bits32(got)[:6]] == [
            "0x0", "0x3f3b26a8", "0xbe89b2b1", "0x41a00000", "0xb3310d40", "0x80000000"]
        assert bits32(got)[6:] == [0x7F800000, 0x7FC00000]  # x / (1 + exp(-x)): -inf / inf = NaN

    def test_rsqrt(self):
        assert bits32(A.rsqrt(f32(4, 0, -0.0, -1, np.inf))) == [
            0x3F000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0]
        assert float(A.rsqrt(b16(2))[0, 0]) == float(np.float32(1 / np.sqrt(2)).astype(ml_dtypes.bfloat16))

    def test_integer_tiles_are_refused(self):
        with pytest.raises(A.ArithError, match="exp needs a float tile, got int32"):
            A.exp(np.zeros((1, 1), np.int32))


# -- conversions and constants -------------------------------------------------------------------

class TestCast:
    def test_float_to_int_rounds_even_and_saturates(self):
        x = f32(2.5, 3.5, -2.5, -0.5, 1e10, -np.inf, np.nan)
        assert A.cast(x, int8).tolist() == [[2, 4, -2, 0, 127, -128, 0]]

    def test_int_to_int_wraps_or_saturates(self):
        x = np.array([[300, -200, 100]], np.int32)
        assert A.cast(x, int8).tolist() == [[44, 56, 100]]
        assert A.cast(x, int8, saturate=True).tolist() == [[127, -128, 100]]

    def test_int_to_float(self):
        assert A.cast(np.array([[16777217]], np.int32), fp32).tolist() == [[16777216.0]]
        # int -> bf16 goes through fp32: 2^30 + 2^22 + 1 -> 2^30 + 2^22 (fp32) -> tie -> 2^30
        r = A.cast(np.array([[2 ** 30 + 2 ** 22 + 1]], np.int32), bf16)
        assert float(r[0, 0]) == 2.0 ** 30

    def test_float_to_float(self):
        assert bits16(A.cast(f32(1 + 3 * 2 ** -8), bf16)) == [0x3F82]
        assert bits32(A.cast(from16(0x7FC1), fp32)) == [0x7FC00000]
        assert bits32(A.cast(from16(0x3F81), fp32)) == [0x3F810000]

    def test_constants_round_through_fp32(self):
        assert bits16(A.constant(0.1, bf16)) == [0x3DCD]
        assert bits32(A.constant(0.1, fp32)) == [0x3DCCCCCD]
        with pytest.raises(A.ArithError, match="constant 300 is not an int8 value"):
            A.constant(300, int8)


# -- evaluation of tile functions ----------------------------------------------------------------

class TestEvaluate:
    def test_composite_rounds_per_primitive(self):
        swiglu = F.function(lambda x, w1, w3: F.silu(x @ w1) * (x @ w3))
        rng = np.random.default_rng(3)
        x = rng.standard_normal((2, 8)).astype(ml_dtypes.bfloat16)
        w1 = rng.standard_normal((8, 4)).astype(ml_dtypes.bfloat16)
        w3 = rng.standard_normal((8, 4)).astype(ml_dtypes.bfloat16)
        want = A.mul(A.silu(A.matmul(x, w1)), A.matmul(x, w3))
        assert A.evaluate(swiglu, x, w1, w3).tobytes() == want.tobytes()

    def test_constants_take_the_partner_dtype(self):
        f = F.function(lambda x: 1 - x * 0.1)
        x = b16(2)
        want = A.sub(A.constant(1, bf16), A.mul(x, A.constant(0.1, bf16)))
        assert A.evaluate(f, x).tobytes() == want.tobytes()
        assert A.evaluate(F.scale(3), np.array([[5]], np.int16)).tolist() == [[15]]

    def test_tuples(self):
        f = F.function(lambda s, x: (F.maximum(s[0], x), s[1] + x))
        out = A.evaluate(f, (f32(1), f32(10)), f32(4))
        assert [o.tolist() for o in out] == [[[4.0]], [[14.0]]]

    def test_init_values(self):
        assert A.init_value(F.zeros(Tile(fp32, 2, 2))).tolist() == [[0, 0], [0, 0]]
        assert bits16(A.init_value(F.full(Tile(bf16, 1, 2), -np.inf))) == [0xFF80, 0xFF80]
        assert A.init_value(F.empty_rows(int8, 3)).shape == (0, 3)
        v = A.init_value(F.as_init((F.zeros(Tile(int32, 1, 1)), F.full(Tile(fp32, 1, 1), 2.0))))
        assert isinstance(v, tuple) and v[0].dtype == np.int32 and v[1].tolist() == [[2.0]]
