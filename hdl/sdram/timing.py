"""The SDRAM chip's geometry and timings, in nanoseconds and in cycles of a clock."""

import math
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from numbers import Real

__all__ = ["SDRAMTiming", "SDRAMCycles", "ULX3S_SDRAM", "MACHINE_SDRAM", "MAX_CLK_HZ",
           "ADDRESS_MAPS"]

#: The address maps of :class:`SDRAMTiming` (``address_map``).
ADDRESS_MAPS = ("row_bank_col", "bank_row_col")

#: The fastest clock for each CAS latency: the slower of the ULX3S's two chips (IS42S16160G-7,
#: MT48LC16M16A2-6A), rounded down to a whole MHz: 166 MHz at CL 3, 100 MHz at CL 2.
MAX_CLK_HZ = {2: 100_000_000, 3: 166_000_000}

_NS_FIELDS = ("t_rp", "t_rcd", "t_ras", "t_rc", "t_rrd", "t_wr", "t_rfc", "t_refi", "t_init")


def _exact(x):
    """``x`` (an int or a float) as a Fraction of the decimal it was written as, so that
    ``20 ns`` at ``100e6`` Hz is exactly 2 cycles."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(float(x)))


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class SDRAMCycles:
    """The timings of an :class:`SDRAMTiming` in cycles of one clock
    (:meth:`SDRAMTiming.cycles`).

    Every minimum (``rp`` .. ``rfc``, ``init``) is rounded up; ``refi``, the average interval
    the chip may wait between two AUTO REFRESH commands, is a maximum and is rounded down.
    ``mrd`` and ``cl`` are cycles already.
    """
    rp: int
    rcd: int
    ras: int
    rc: int
    rrd: int
    wr: int
    rfc: int
    refi: int
    init: int
    mrd: int
    cl: int


@dataclass(frozen=True, repr=False)
class SDRAMTiming:
    """A single-data-rate SDRAM: its geometry and the timings the controller keeps and the chip
    model checks.

    The defaults are :data:`ULX3S_SDRAM`, the ULX3S board's 32 MB chip.

    **Address map** (``address_map``). ``"row_bank_col"`` (the default): a word address is
    ``row | bank | column``, the column in the low ``col_bits``, the bank above it, the row on
    top: ``addr = (row << (bank_bits + col_bits)) | (bank << col_bits) | col``. Consecutive
    words fill one row of one bank; the next ``2**col_bits`` words are the same row of the next
    bank, so a long stream goes round the banks and leaves each row open behind it: the row it
    opens next is in another bank, whose precharge and activate do not wait for the row just
    streamed (tRAS, tRC) and which a later controller can open while the current row streams.
    ``"bank_row_col"``: the bank on top, ``addr = (bank << (row_bits + col_bits)) | (row <<
    col_bits) | col``: each bank is one contiguous quarter (or half) of the chip, so data
    placed in different banks (:attr:`bank_words` apart) keeps a row open in each, and streams
    that interleave word by word never close each other's rows (the lowering puts tensors in
    banks in turn on an SDRAM machine). A long stream changes rows within one bank, a
    precharge and an activate every ``2**col_bits`` words.

    Parameters
    ----------
    data_bits : int, default 16
        Width of the data bus: 8, 16 or 32.
    banks : int, default 4
        2 or 4.
    row_bits : int, default 13
        11 to 13 (rows per bank ``2**row_bits``).
    col_bits : int, default 9
        8 to 10 (words per row ``2**col_bits``; A10 is never a column bit).
    t_rp, t_rcd, t_ras, t_rc, t_rrd, t_wr, t_rfc : float
        Minimum nanoseconds: PRECHARGE to ACTIVATE (tRP), ACTIVATE to READ or WRITE (tRCD),
        ACTIVATE to PRECHARGE (tRAS), ACTIVATE to ACTIVATE of one bank (tRC), ACTIVATE to
        ACTIVATE of two banks (tRRD), last WRITE to PRECHARGE (tWR), AUTO REFRESH to any
        command (tRFC).
    t_refi : float, default 7812.5
        Average nanoseconds between two AUTO REFRESH commands (64 ms / 8192 rows).
    t_init : float, default 200000
        Nanoseconds of NOPs after power-up before the first command.
    t_mrd_cycles : int, default 2
        Cycles from LOAD MODE REGISTER to the next command.
    cas_latency : int, default 3
        2 or 3.
    address_map : {"row_bank_col", "bank_row_col"}, default "row_bank_col"
        How a word address is cut into bank, row and column (above).

    Raises
    ------
    ValueError
        A field out of its range; the message names the field and the value.
    """
    data_bits: int = 16
    banks: int = 4
    row_bits: int = 13
    col_bits: int = 9
    t_rp: float = 20
    t_rcd: float = 20
    t_ras: float = 44
    t_rc: float = 66
    t_rrd: float = 15
    t_wr: float = 15
    t_rfc: float = 66
    t_refi: float = 7812.5
    t_init: float = 200_000
    t_mrd_cycles: int = 2
    cas_latency: int = 3
    address_map: str = "row_bank_col"

    def __post_init__(self):
        def check(name, ok, what):
            value = getattr(self, name)
            if not ok(value):
                raise ValueError(f"SDRAMTiming {name} must be {what}, not {value!r}")
        check("data_bits", lambda v: _is_int(v) and v in (8, 16, 32), "8, 16 or 32")
        check("banks", lambda v: _is_int(v) and v in (2, 4), "2 or 4")
        check("row_bits", lambda v: _is_int(v) and 11 <= v <= 13, "an int from 11 to 13")
        check("col_bits", lambda v: _is_int(v) and 8 <= v <= 10, "an int from 8 to 10")
        for name in _NS_FIELDS:
            check(name, lambda v: isinstance(v, Real) and not isinstance(v, bool) and v > 0
                  and math.isfinite(v), "a positive number of ns")
        check("t_mrd_cycles", lambda v: _is_int(v) and v >= 1, "an int >= 1")
        check("cas_latency", lambda v: _is_int(v) and v in (2, 3), "2 or 3")
        check("address_map", lambda v: v in ADDRESS_MAPS, " or ".join(map(repr, ADDRESS_MAPS)))

    def __repr__(self):
        changed = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                            if getattr(self, f.name) != f.default)
        return f"SDRAMTiming({changed})"

    @property
    def bank_bits(self):
        """Bits of a bank number."""
        return (self.banks - 1).bit_length()

    @property
    def addr_bits(self):
        """Bits of a word address (``row_bits + bank_bits + col_bits``)."""
        return self.row_bits + self.bank_bits + self.col_bits

    @property
    def words(self):
        """Words in the chip."""
        return 1 << self.addr_bits

    @property
    def pin_addr_bits(self):
        """Width of the ``A`` pins: the row, and at least A0-A10 (A10 selects all banks)."""
        return max(self.row_bits, 11)

    @property
    def bank_words(self):
        """Words of one bank (``2**(row_bits + col_bits)``): with ``"bank_row_col"``, the
        distance from one bank's first word to the next's."""
        return 1 << (self.row_bits + self.col_bits)

    def _spans(self):
        """``(low bit, width)`` of the bank, the row and the column in a word address: the one
        place the address map is written down (:meth:`split`, :meth:`fields`)."""
        cb, bb, rb = self.col_bits, self.bank_bits, self.row_bits
        if self.address_map == "bank_row_col":
            return (cb + rb, bb), (cb, rb), (0, cb)
        return (cb, bb), (cb + bb, rb), (0, cb)

    def split(self, addr):
        """``(bank, row, col)`` of the word address ``addr`` (see the address map)."""
        return tuple((addr >> low) & ((1 << width) - 1) for low, width in self._spans())

    def fields(self, addr):
        """``(col, bank, row)``: the slices of the Amaranth value ``addr`` (a word address of
        :attr:`addr_bits`) that hold them (see the address map)."""
        bank, row, col = (addr[low:low + width] for low, width in self._spans())
        return col, bank, row

    def cycles(self, clk_hz):
        """The timings in cycles of a ``clk_hz`` clock (:class:`SDRAMCycles`).

        Raises
        ------
        ValueError
            ``clk_hz`` is not a positive number or is faster than :data:`MAX_CLK_HZ` allows at
            this CAS latency.
        """
        if (not isinstance(clk_hz, Real) or isinstance(clk_hz, bool) or not clk_hz > 0
                or not math.isfinite(clk_hz)):
            raise ValueError(f"SDRAMTiming clock must be a positive number of Hz, not {clk_hz!r}")
        limit = MAX_CLK_HZ[self.cas_latency]
        if clk_hz > limit:
            raise ValueError(f"SDRAMTiming clock must be at most {limit / 1e6:g} MHz at CL "
                             f"{self.cas_latency}, not {clk_hz / 1e6:g} MHz")
        hz = _exact(clk_hz)

        def up(name):
            return max(1, math.ceil(_exact(getattr(self, name)) * hz / 10**9))
        refi = math.floor(_exact(self.t_refi) * hz / 10**9)
        return SDRAMCycles(rp=up("t_rp"), rcd=up("t_rcd"), ras=up("t_ras"), rc=up("t_rc"),
                           rrd=up("t_rrd"), wr=up("t_wr"), rfc=up("t_rfc"), refi=refi,
                           init=up("t_init"), mrd=self.t_mrd_cycles, cl=self.cas_latency)

    def table(self, clk_hz):
        """``[(name, ns or None, cycles)]`` for documentation: every timing at ``clk_hz``."""
        cyc = self.cycles(clk_hz)
        rows = [(f.name, getattr(self, f.name), getattr(cyc, f.name[2:]))
                for f in fields(self) if f.name in _NS_FIELDS]
        return rows + [("t_mrd", None, cyc.mrd), ("cas_latency", None, cyc.cl)]


#: The ULX3S's SDRAM (IS42S16160G-7 or MT48LC16M16A2-6A, 16M x 16): the slower of the two
#: chips' minimums for every timing, CL 3.
ULX3S_SDRAM = SDRAMTiming(data_bits=16, banks=4, row_bits=13, col_bits=9, t_rp=20, t_rcd=20,
                          t_ras=44, t_rc=66, t_rrd=15, t_wr=15, t_rfc=66, t_refi=7812.5,
                          t_init=200_000, t_mrd_cycles=2, cas_latency=3)

#: The chip of a ``memory="sdram"`` machine (:class:`~stepforge.hdl.config.HardwareConfig`):
#: the ULX3S's, addressed with the bank on top (``"bank_row_col"``), the lowering placing
#: tensors in its banks in turn.
MACHINE_SDRAM = replace(ULX3S_SDRAM, address_map="bank_row_col")
