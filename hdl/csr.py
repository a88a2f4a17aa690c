"""A bank of read-only 32-bit status registers (CSRs) behind a one-cycle read port."""

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["CSRBank"]


class CSRBank(wiring.Component):
    """Named read-only registers, each 32 bits wide, at consecutive word addresses.

    The values are sampled by the bank's owner through :meth:`add` before elaboration; a read of
    address ``a`` returns register ``a`` one cycle later (``rdata`` is registered) and 0 for an
    address past the last register.

    Parameters
    ----------
    max_registers : int
        Upper bound of registers the bank may hold (sizes ``addr``).

    Members
    -------
    addr : ``In(range(max_registers))``
        Register to read.
    rdata : ``Out(32)``
        Its value, one cycle after ``addr``.
    """

    def __init__(self, max_registers=4096):
        self.max_registers = max_registers
        self._regs = []
        super().__init__({"addr": In(max(1, ceil_log2(max_registers))), "rdata": Out(32)})

    def __repr__(self):
        return f"CSRBank({self.max_registers})"

    def add(self, name, value):
        """Give ``value`` (at most 32 bits) the next address; return that address."""
        value = Value.cast(value)
        if value.shape().width > 32:
            raise ValueError(f"CSR {name!r} is {value.shape().width} bits wide, more than 32")
        if len(self._regs) >= self.max_registers:
            raise ValueError(f"CSR bank is full ({self.max_registers} registers)")
        self._regs.append((name, value))
        return len(self._regs) - 1

    @property
    def names(self):
        """``{name: address}`` of every register."""
        return {name: i for i, (name, _) in enumerate(self._regs)}

    def elaborate(self, platform):
        m = Module()
        rdata = Signal(32, name="csr_rdata")
        with m.Switch(self.addr):
            for i, (name, value) in enumerate(self._regs):
                with m.Case(i):
                    m.d.sync += rdata.eq(value)
            with m.Default():
                m.d.sync += rdata.eq(0)
        m.d.comb += self.rdata.eq(rdata)
        return m
