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

#: The chip's one-bit output pins: (top-level port, the pin signature's member, the board
#: resource's subsignal); the chip's clock comes apart (an ``ODDRX1F``).
_SINGLE = (("sdram_cke", "clk_en", "clk_en"), ("sdram_cs_n", "cs_n", "cs"),
           ("sdram_ras_n", "ras_n", "ras"), ("sdram_cas_n", "cas_n", "cas"),
           ("sdram_we_n", "we_n", "we"))
#: Its buses of output pins (the member and the subsignal share the name).
_BUSES = ("ba", "a", "dqm")


def _width(signature, name):
    return Shape.cast(signature.members[name].shape).width


def sdram_ports(signature):
    """``[(port name, PinRef, direction), ...]`` of an SDRAM pin signature's pins, outputs
    first, then the ``dq`` pins (``"io"``)."""
    ports = [("sdram_clk", PinRef("sdram", 0, "clk"), "o")]
    ports += [(port, PinRef("sdram", 0, sub), "o") for port, _, sub in _SINGLE]
    for name in _BUSES:
        ports += [(f"sdram_{name}{k}", PinRef("sdram", 0, name, k), "o")
                  for k in range(_width(signature, name))]
    ports += [(f"sdram_dq{k}", PinRef("sdram", 0, "dq", k), "io")
              for k in range(_width(signature, "dq_o"))]
    return ports


def connect_sdram(m, top, pins):
    """Wire the design's SDRAM port ``pins`` to the top's ports (module doc): the output pins
    are ``top``'s members of :func:`sdram_ports`' names; the ``dq`` pins are I/O ports of the
    converted module, made here."""
    m.d.comb += [getattr(top, port).eq(getattr(pins, member)) for port, member, _ in _SINGLE]
    for name in _BUSES:
        value = getattr(pins, name)
        m.d.comb += [getattr(top, f"sdram_{name}{k}").eq(value[k]) for k in range(len(value))]
    m.submodules.sdram_clk = Instance("ODDRX1F", i_SCLK=ClockSignal(), i_RST=0, i_D0=0, i_D1=1,
                                      o_Q=top.sdram_clk)
    for k in range(len(pins.dq_o)):
        m.submodules[f"sdram_dq{k}"] = Instance("BB", i_I=pins.dq_o[k], i_T=~pins.dq_oe,
                                                o_O=pins.dq_i[k],
                                                io_B=IOPort(1, name=f"sdram_dq{k}"))
