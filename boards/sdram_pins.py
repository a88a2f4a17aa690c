"""The pins of a board's SDRAM chip around a design's ``sdram`` port.

:func:`sdram_ports` names one top-level port per pin, after the board's ``sdram`` resource of
``amaranth-boards`` (:class:`~stepforge.boards.presets.board.PinRef` with the bit's index);
:func:`connect_sdram` wires a design's :class:`~stepforge.hdl.sdram.SDRAMPinSignature` port to
them on an ECP5:

* the controller's outputs (every one a register in the controller) go straight to their
  pins; the resource's active-low pins (``cs``, ``we``, ``ras``, ``cas``) take the signals as
  they are (they are the pins' levels already);
* each ``dq`` pin is a ``BB`` buffer: ``dq_o`` out while ``dq_oe``, ``dq_i`` in;
* the chip's clock comes from an ``ODDRX1F`` that sends the design clock inverted, so the
  chip samples a command in the middle of the cycle the controller holds it, and returns a read
  word ``CL`` chip edges later, inside the cycle in which the controller's input register
  takes it (the cycle :class:`~stepforge.hdl.sdram.SDRAMChipModel` gives it;
  ``docs/sdram.md``, "The board").
"""

from amaranth.hdl import ClockSignal, Instance, IOPort, Shape

from .presets.board import PinRef

__all__ = ["sdram_ports", "connect_sdram"]


def sdram_ports(signature):
    """``[(port name, PinRef, direction), ...]`` of an SDRAM pin signature's pins, outputs
    first, then the ``dq`` pins (``"io"``)."""
    ports = [("sdram_clk", PinRef("sdram", 0, "clk"), "o"),
             ("sdram_cke", PinRef("sdram", 0, "clk_en"), "o"),
             ("sdram_cs_n", PinRef("sdram", 0, "cs"), "o"),
             ("sdram_ras_n", PinRef("sdram", 0, "ras"), "o"),
             ("sdram_cas_n", PinRef("sdram", 0, "cas"), "o"),
             ("sdram_we_n", PinRef("sdram", 0, "we"), "o")]
    for name in ("ba", "a", "dqm"):
        width = Shape.cast(signature.members[name].shape).width
        ports += [(f"sdram_{name}{k}", PinRef("sdram", 0, name, k), "o") for k in range(width)]
    width = Shape.cast(signature.members["dq_o"].shape).width
    ports += [(f"sdram_dq{k}", PinRef("sdram", 0, "dq", k), "io") for k in range(width)]
    return ports


def connect_sdram(m, top, pins):
    """Wire the design's SDRAM port ``pins`` to the top's ports (module doc): the output pins
    are ``top``'s members of :func:`sdram_ports`' names; the ``dq`` pins are I/O ports made
    here and returned."""
    m.d.comb += [getattr(top, "sdram_cke").eq(pins.clk_en),
                 getattr(top, "sdram_cs_n").eq(pins.cs_n),
                 getattr(top, "sdram_ras_n").eq(pins.ras_n),
                 getattr(top, "sdram_cas_n").eq(pins.cas_n),
                 getattr(top, "sdram_we_n").eq(pins.we_n)]
    for name in ("ba", "a", "dqm"):
        value = getattr(pins, name)
        m.d.comb += [getattr(top, f"sdram_{name}{k}").eq(value[k]) for k in range(len(value))]
    m.submodules.sdram_clk = Instance("ODDRX1F", i_SCLK=ClockSignal(), i_RST=0, i_D0=0, i_D1=1,
                                      o_Q=top.sdram_clk)
    dq = []
    for k in range(len(pins.dq_o)):
        port = IOPort(1, name=f"sdram_dq{k}")
        m.submodules[f"sdram_dq{k}"] = Instance("BB", i_I=pins.dq_o[k], i_T=~pins.dq_oe,
                                                o_O=pins.dq_i[k], io_B=port)
        dq.append(port)
    return dq
