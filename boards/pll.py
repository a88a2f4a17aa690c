"""The ECP5 PLL (``EHXPLLL``) that makes a board's design clock from its oscillator.

:func:`ecp5_pll_params` chooses the dividers as Project Trellis' ``ecppll`` does: the phase
detector between 3.125 and 400 MHz, the VCO between 400 and 800 MHz (nearest 600 MHz wins among
exact solutions), feedback from the output itself, so ``f_out = f_in * CLKFB_DIV / CLKI_DIV``
and ``f_vco = f_out * CLKOP_DIV``. :func:`ecp5_pll` instantiates it with the
``FREQUENCY_PIN_*`` attributes that nextpnr reads to constrain the output clock.
"""

from dataclasses import dataclass

from amaranth.hdl import Instance, Signal

__all__ = ["PLLParams", "ecp5_pll_params", "ecp5_pll"]


@dataclass(frozen=True)
class PLLParams:
    """The dividers of an ``EHXPLLL`` with its output fed back (``FEEDBK_PATH="CLKOP"``)."""
    clki_div: int
    clkfb_div: int
    clkop_div: int
    f_in: int
    f_out: int

    @property
    def f_vco(self):
        return self.f_out * self.clkop_div


def ecp5_pll_params(f_in, f_out):
    """The :class:`PLLParams` that make exactly ``f_out`` Hz from ``f_in`` Hz.

    Raises
    ------
    ValueError
        No divider setting gives exactly ``f_out``.
    """
    best = None
    for clki_div in range(1, 129):
        f_pfd = f_in / clki_div
        if not 3.125e6 <= f_pfd <= 400e6:
            continue
        for clkfb_div in range(1, 81):
            if f_in * clkfb_div != f_out * clki_div:
                continue
            for clkop_div in range(1, 129):
                f_vco = f_out * clkop_div
                if 400e6 <= f_vco <= 800e6:
                    p = PLLParams(clki_div, clkfb_div, clkop_div, f_in, f_out)
                    if best is None or abs(f_vco - 600e6) < abs(best.f_vco - 600e6):
                        best = p
    if best is None:
        raise ValueError(f"an ECP5 PLL cannot make exactly {f_out / 1e6:g} MHz from "
                         f"{f_in / 1e6:g} MHz")
    return best


def ecp5_pll(m, clk_in, f_in, f_out):
    """Add an ``EHXPLLL`` to module ``m`` that makes ``f_out`` Hz from ``clk_in`` (``f_in``
    Hz); return ``(clock, locked)`` signals."""
    p = ecp5_pll_params(f_in, f_out)
    clk_out = Signal(name="pll_clk")
    locked = Signal(name="pll_locked")
    m.submodules.pll = Instance(
        "EHXPLLL",
        a_FREQUENCY_PIN_CLKI=f"{f_in / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{f_out / 1e6:g}",
        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
        a_MFG_GMCREF_SEL="2",
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
        p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
        p_CLKI_DIV=p.clki_div, p_CLKFB_DIV=p.clkfb_div,
        p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div,
        p_CLKOP_CPHASE=p.clkop_div // 2 - 1 if p.clkop_div > 1 else 0, p_CLKOP_FPHASE=0,
        p_FEEDBK_PATH="CLKOP",
        i_RST=0, i_STDBY=0, i_CLKI=clk_in, i_CLKFB=clk_out, o_CLKOP=clk_out,
        i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
        i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked)
    return clk_out, locked
