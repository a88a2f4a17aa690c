"""The PMU's data memory: one write port, a read port per read side, each read in two cycles
with its output register inside the block RAM on ECP5."""

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import Out
from amaranth.utils import ceil_log2

from ..memory.lane_ram import DP16KD_SHAPES
from ..platform import platform_family
from ..ram_attrs import NO_COLLISION

__all__ = ["DataRAM", "dp16kd_organization"]


def dp16kd_organization(width, depth):
    """``(data bits per block, blocks)`` of a ``width x depth`` memory as ``DP16KD`` blocks
    one deep: the widest organization of :data:`~stepforge.hdl.memory.DP16KD_SHAPES` with
    ``depth`` rows or more (18 bits up to 1,024 rows, 9 up to 2,048, ...), or None deeper than
    16,384 rows (a deeper memory would need banks and their multiplexer)."""
    for bits, rows in DP16KD_SHAPES:
        if depth <= rows:
            return bits, -(-width // bits)
    return None


class DataRAM(wiring.Component):
    """``depth`` words of ``shape``, written through ``write`` and read through ``read{i}``
    in two cycles: the block RAM's read register, then an output register.

    Elaborated for an ECP5 platform (:func:`~stepforge.hdl.platform.platform_family`) each read
    port is a column of ``DP16KD`` instances (:func:`dp16kd_organization`), written on port A
    and read on port B with ``REGMODE_B "OUTREG"``: the output register is the block's own, so
    the block RAM's slow clock-to-out (5.8 ns on speed 6) ends inside it instead of crossing the
    fabric to a flip-flop (the last path over 10 ns of SwiGLU I=256 at 100 MHz, 10.3 ns; Yosys
    never turns a following flip-flop into the block's register). Elsewhere (the simulation
    target, iCE40) a :class:`~amaranth.lib.memory.Memory` with a flip-flop after its read
    port. Both forms have the same cycles.

    A write passes a register stage first (its address, data and enable), so the writer's
    decision ends in flip-flops instead of fanning out to every block's pins (15 ``DP16KD`` at
    SwiGLU I=256: 12.5 ns from the write side's queue into the blocks and the writer's own
    registers): the word is in the memory from the cycle after next. A read of an address
    that was written in the same cycle or the one before returns an undefined word: the PMU
    replays a buffer only after it has closed, and its first command reaches the replay's
    read at least two cycles after the buffer's last write (the ``refs`` beat, its edge FIFO
    and the command queue's register); see :data:`~stepforge.hdl.ram_attrs.NO_COLLISION`.

    Parameters
    ----------
    shape : shape-like
        One word.
    depth : int
        Words (``>= 2``).
    readers : int, default 1
        Read ports.

    Members
    -------
    write : ``Out(WritePort.Signature(addr_width=ceil_log2(depth), shape=shape))``
        The word ``data`` written at ``addr`` where ``en`` (stored at the next clock edge but
        one).
    read0, read1, ... : ``Out(ReadPort.Signature(addr_width=ceil_log2(depth), shape=shape))``
        ``data`` is the word at the ``addr`` of two cycles before, read where ``en`` was high a
        cycle after that ``addr`` (else the word before; the output register takes every cycle).
    """

    #: Cycles from a read port's ``addr`` to its ``data``.
    read_latency = 2

    def __init__(self, shape, depth, readers=1):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"DataRAM depth must be an integer of at least 2, not {depth!r}")
        if not isinstance(readers, int) or readers < 1:
            raise ValueError(f"DataRAM readers must be a positive integer, not {readers!r}")
        self.shape, self.depth, self.readers = shape, depth, readers
        aw = ceil_log2(depth)
        members = {"write": Out(WritePort.Signature(addr_width=aw, shape=shape))}
        for i in range(readers):
            members[f"read{i}"] = Out(ReadPort.Signature(addr_width=aw, shape=shape))
        super().__init__(members)

    def __repr__(self):
        return f"DataRAM({self.shape!r}, {self.depth}, readers={self.readers})"

    def read_port(self, i):
        """Read port ``i``."""
        return getattr(self, f"read{i}")

    def elaborate(self, platform):
        m = Module()
        width = len(Value.cast(self.write.data))
        # the write stage
        # (the address and data matter only with the enable: no reset, so the hold reset and its
        # fanout stay off them)
        wr = self.write.signature.create(path=("write_q",))
        addr_q = Signal.like(self.write.addr, name="write_q_addr", reset_less=True)
        data_q = Signal.like(self.write.data, name="write_q_data", reset_less=True)
        m.d.sync += [addr_q.eq(self.write.addr), data_q.eq(self.write.data),
                     wr.en.eq(self.write.en)]
        m.d.comb += [wr.addr.eq(addr_q), wr.data.eq(data_q)]
        org = dp16kd_organization(width, self.depth)
        if platform_family(platform) == "ecp5" and org is not None:
            for i in range(self.readers):
                self._dp16kd_column(m, i, wr, width, *org)
            return m
        m.submodules.mem = mem = Memory(shape=self.shape, depth=self.depth, init=[],
                                        attrs=NO_COLLISION)
        wiring.connect(m, wiring.flipped(wr), mem.write_port())
        for i in range(self.readers):
            port, rd = self.read_port(i), mem.read_port()
            m.d.comb += [rd.addr.eq(port.addr), rd.en.eq(port.en)]
            word = Signal.like(port.data, name=f"read{i}_word", reset_less=True)
            m.d.sync += word.eq(rd.data)
            m.d.comb += port.data.eq(word)
        return m

    def _dp16kd_column(self, m, i, wr, width, bits, blocks):
        """Read port ``i`` as ``blocks`` ``DP16KD`` of ``bits`` each, wired as Yosys wires an
        inferred one (the row above the address pins that ``bits`` leaves unused; at 18 bits
        ``ADA[1:0]`` are port A's byte enables, the write enable for each 9-bit half that holds
        bits of the word)."""
        port = self.read_port(i)
        shift = {18: 4, 9: 3, 4: 2, 2: 1, 1: 0}[bits]
        wdata = Signal(blocks * bits, name=f"read{i}_wdata")
        rdata = Signal(blocks * bits, name=f"read{i}_rdata")
        m.d.comb += [wdata.eq(Value.cast(wr.data)), port.data.eq(rdata[:width])]
        adb = [Const(0, 1)] * shift + list(port.addr) + [Const(0, 1)] * 14
        for k in range(blocks):
            ada = [Const(0, 1)] * shift + list(wr.addr) + [Const(0, 1)] * 14
            if bits == 18:   # the byte enables of the 9-bit halves the block holds
                ada[0] = wr.en
                ada[1] = wr.en if width - k * bits > 9 else Const(0, 1)
            pins = {}
            for j in range(14):
                pins[f"i_ADA{j}"], pins[f"i_ADB{j}"] = ada[j], adb[j]
            for j in range(18):
                pins[f"i_DIA{j}"] = wdata[k * bits + j] if j < bits else Const(0, 1)
                pins[f"i_DIB{j}"] = Const(0, 1)
                if j < bits:
                    pins[f"o_DOB{j}"] = rdata[k * bits + j]
            for j in range(3):
                pins[f"i_CSA{j}"] = pins[f"i_CSB{j}"] = Const(0, 1)
            m.submodules[f"read{i}_bram{k}"] = Instance(
                "DP16KD", p_DATA_WIDTH_A=bits, p_DATA_WIDTH_B=bits, p_REGMODE_A="NOREG",
                p_REGMODE_B="OUTREG", p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL",
                p_CSDECODE_A="0b000", p_CSDECODE_B="0b000", p_RESETMODE="SYNC",
                p_ASYNC_RESET_RELEASE="SYNC", p_GSR="DISABLED",
                i_CLKA=ClockSignal(), i_CEA=Const(1, 1), i_OCEA=Const(1, 1), i_WEA=wr.en,
                i_RSTA=Const(0, 1),
                i_CLKB=ClockSignal(), i_CEB=port.en, i_OCEB=Const(1, 1), i_WEB=Const(0, 1),
                i_RSTB=Const(0, 1), **pins)
