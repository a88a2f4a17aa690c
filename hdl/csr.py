"""A bank of read-only 32-bit status registers (CSRs) behind a one-cycle read port."""

from amaranth.hdl import Array, Module, Mux, Signal, Value
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
        n = len(self._regs)
        if n:
            # a multiplexer by the address bits that tell the registers apart, and beside it
            # the check that the address names a register at all (the rest of the address is
            # zero): two shallow trees instead of a full-width compare in front of every case
            k = ceil_log2(n)
            values = [Value.cast(v) for _, v in self._regs]
            low = self.addr[:k]
            hit = Signal(name="csr_hit")
            m.d.comb += hit.eq((self.addr[k:] == 0) & (low < n))
            picked = Signal(32, name="csr_picked")
            if k:
                m.d.comb += picked.eq(Array(values + [values[-1]] * ((1 << k) - n))[low])
            else:
                m.d.comb += picked.eq(values[0])
            m.d.sync += rdata.eq(Mux(hit, picked, 0))
        m.d.comb += self.rdata.eq(rdata)
        return m
