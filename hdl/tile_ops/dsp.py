"""Multipliers as DSP blocks: the device family whose primitives the PCU instantiates
(:func:`dsp_family`) and a product with the DSP block's input and output registers
(:func:`pipelined_product`: ``MULT18X18D`` instances on ECP5)."""

from amaranth.hdl import ClockSignal, Const, Instance, Mux, Signal, Value, signed

from ..platform import platform_family

__all__ = ["dsp_family", "pipelined_product"]


def dsp_family(platform):
    """The device family whose DSP primitives the PCU instantiates.

    ``"ecp5"`` for a platform whose ``family`` is ``"ecp5"`` (Amaranth's ``LatticePlatform``,
    or any object with that attribute): multipliers become ``MULT18X18D`` with their input and
    output registers inside the DSP block (Yosys infers ``MULT18X18D`` but never moves registers
    into it). ``None`` otherwise: generic Verilog, the registers next to the ``*`` (which
    ``synth_ice40 -dsp`` packs into ``SB_MAC16``, and which simulation uses).
    """
    return "ecp5" if platform_family(platform) == "ecp5" else None


def pipelined_product(m, a, b, width, enable, name, family=None, operand_regs=1, product_regs=1,
                      zero=None):
    """``a * b`` wrapped to ``signed(width)``, ``operand_regs + product_regs`` pipeline moves
    after ``a`` and ``b``.

    Both operands are registered, then the product: a DSP block's input and output registers.
    With ``operand_regs=2`` the operands pass one more register first, and with
    ``product_regs=2`` the product one more after (in the fabric, next to the logic that
    selects the operands or adds the products: the iCE40's DSP blocks are far from it). All
    registers have the clock enable ``enable`` and no reset. On ECP5 (``family="ecp5"``,
    operands of at most 18 bits) the multiplier is a ``MULT18X18D`` with its registers inside
    it. With ``zero`` the first register of ``a`` takes 0 where ``zero`` is high (its
    synchronous reset), so the product is 0.

    Returns
    -------
    amaranth.hdl.Value
        ``signed(width)``.
    """
    a, b = Value.cast(a), Value.cast(b)
    for k in range(operand_regs - 1):
        ra = Signal(a.shape(), name=f"{name}_ra{k}", reset_less=True)
        rb = Signal(b.shape(), name=f"{name}_rb{k}", reset_less=True)
        with m.If(enable):
            m.d.sync += [ra.eq(a if zero is None else Mux(zero, 0, a)), rb.eq(b)]
        a, b, zero = ra, rb, None
    if family == "ecp5" and max(len(a), len(b)) <= 18 and width <= 36:
        p = _mult18x18d(m, a, b, width, enable, name, zero)
    else:
        ra = Signal(a.shape(), name=f"{name}_ra", reset_less=True)
        rb = Signal(b.shape(), name=f"{name}_rb", reset_less=True)
        p = Signal(signed(width), name=f"{name}_p", reset_less=True)
        with m.If(enable):
            m.d.sync += [ra.eq(a if zero is None else Mux(zero, 0, a)), rb.eq(b), p.eq(ra * rb)]
    for k in range(product_regs - 1):
        rp = Signal(signed(width), name=f"{name}_rp{k}", reset_less=True)
        with m.If(enable):
            m.d.sync += rp.eq(p)
        p = rp
    return p


def _mult18x18d(m, a, b, width, enable, name, zero=None):
    """An ECP5 ``MULT18X18D``, signed, input registers A and B and the output register on
    ``CLK0``/``CE0`` (no pipeline register, not on the global set/reset); with ``zero`` the A
    register's synchronous reset is ``RST1 = zero & enable``, the others have none."""
    ax = Signal(signed(18), name=f"{name}_ax")
    bx = Signal(signed(18), name=f"{name}_bx")
    p = Signal(36, name=f"{name}_p36")
    m.d.comb += [ax.eq(a), bx.eq(b)]
    regs = {}
    for r in ("INPUTA", "INPUTB", "INPUTC", "PIPELINE", "OUTPUT"):
        regs[f"p_REG_{r}_CLK"] = "CLK0" if r in ("INPUTA", "INPUTB", "OUTPUT") else "NONE"
        regs[f"p_REG_{r}_CE"] = "CE0"
        regs[f"p_REG_{r}_RST"] = "RST1" if r == "INPUTA" else "RST0"
    ports = {}
    for k in range(18):
        ports[f"i_A{k}"], ports[f"i_B{k}"], ports[f"i_C{k}"] = ax[k], bx[k], Const(0, 1)
    for k in range(36):
        ports[f"o_P{k}"] = p[k]
    for k in range(4):
        ports[f"i_CLK{k}"] = ClockSignal() if k == 0 else Const(0, 1)
        ports[f"i_CE{k}"] = enable if k == 0 else Const(0, 1)
        ports[f"i_RST{k}"] = (zero & enable) if k == 1 and zero is not None else Const(0, 1)
    m.submodules[f"{name}_dsp"] = Instance(
        "MULT18X18D", **regs, p_GSR="DISABLED", p_RESETMODE="SYNC", p_SOURCEB_MODE="B_SHIFT",
        p_MULT_BYPASS="DISABLED", p_CAS_MATCH_REG="FALSE", p_HIGHSPEED_CLK="NONE",
        i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
        **ports)
    out = Signal(signed(width), name=f"{name}_p")
    m.d.comb += out.eq(p[:width])
    return out


def _operand_regs(family):
    """Registers on a multiplier's operands: two on an FPGA (one in the fabric beside the
    logic that selects the operand, one in the ``SB_MAC16`` or ``MULT18X18D``: the DSP blocks
    sit in columns away from that logic; on the ECP5 the one-hot step through a matmul's
    operand multiplexer into the DSP block's input register was a 10.8 ns path of SwiGLU
    I=256), else one."""
    return 1 if family is None else 2
