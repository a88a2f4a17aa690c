"""One lane of the memory's storage: a single-port RAM with a registered read."""

from amaranth.hdl import ClockSignal, Instance, MemoryData, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["LaneRAM", "lane_ram_verilog", "LANE_RAM_MODULE", "LANE_RAM_LATENCY"]

#: Cycles from a lane's address to its word on ``rdata``.
LANE_RAM_LATENCY = 2

#: Name of the Verilog module of :func:`lane_ram_verilog`.
LANE_RAM_MODULE = "stepforge_lane_ram"


def lane_ram_verilog(zero_init=True):
    """The Verilog of the storage of one lane for ``storage="verilog"``.

    A single-port RAM with a registered read that keeps its value in a cycle that writes
    ("no change": the memory never uses a lane's read in the cycle it writes that lane), and one
    more register after it: a deep lane is several block RAMs whose outputs are multiplexed
    (eight ``DP16KD`` for 4,096 rows of 32 bits), and a block RAM's output without its own
    register is slow (5.6 ns on ECP5 speed 6), so the multiplexer ends in a flip-flop. Yosys
    maps it to block RAM (``DP16KD``, ``SB_RAM40_4K``) and, 16 bits wide and without initial
    contents, to iCE40 ``SB_SPRAM256KA``, whose read port behaves that way.

    Amaranth writes every initial word of a ``lib.memory`` into its Verilog, so a memory of
    hundreds of kilobytes would make a Verilog file of hundreds of thousands of lines; this module
    keeps it to a loop. ``zero_init`` (the simulation target) clears the words at time zero; a
    board build leaves them uninitialized (SPRAM has no initial contents).
    Append the text to the design's Verilog.
    """
    init = """
  integer i;
  initial begin
    for (i = 0; i < DEPTH; i = i + 1) mem[i] = {WIDTH{1'b0}};
    rdata_q = {WIDTH{1'b0}};
    rdata_qq = {WIDTH{1'b0}};
  end""" if zero_init else ""
    return f"""
module {LANE_RAM_MODULE} #(parameter WIDTH = 64, parameter DEPTH = 16, parameter AW = 4) (
  input clk, input [AW-1:0] addr, input [WIDTH-1:0] wdata, input we, output [WIDTH-1:0] rdata);
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  reg [WIDTH-1:0] rdata_q;
  reg [WIDTH-1:0] rdata_qq;{init}
  always @(posedge clk) begin
    if (we) mem[addr] <= wdata;
    else rdata_q <= mem[addr];
    rdata_qq <= rdata_q;
  end
  assign rdata = rdata_qq;
endmodule
"""


class LaneRAM(wiring.Component):
    """The storage of one memory lane: ``depth`` words, one access per cycle, read in
    :data:`LANE_RAM_LATENCY` cycles.

    Parameters
    ----------
    data : amaranth.hdl.MemoryData
        The words (``storage="amaranth"``: the simulator's back door reaches them through it).
    storage : {"amaranth", "verilog"}
        ``"amaranth"``: a :class:`~amaranth.lib.memory.Memory`; ``"verilog"``: an instance of
        :func:`lane_ram_verilog`'s module.

    Members
    -------
    addr : ``In(range(depth))``
        The row read (and written, with ``we``) at the next clock edge.
    we : ``In(1)``
    wdata : ``In(width)``
    rdata : ``Out(width)``
        The row addressed two cycles earlier, if that cycle did not write (else the word before).
    """

    def __init__(self, data, storage):
        if not isinstance(data, MemoryData):
            raise TypeError(f"LaneRAM data must be a MemoryData, not {data!r}")
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"LaneRAM storage must be 'amaranth' or 'verilog', not {storage!r}")
        self.data, self.storage = data, storage
        width = data.shape.width
        self.addr_bits = max(1, ceil_log2(data.depth))
        super().__init__({"addr": In(unsigned(self.addr_bits)), "we": In(1),
                          "wdata": In(width), "rdata": Out(width)})

    def __repr__(self):
        return f"LaneRAM({self.data!r}, {self.storage!r})"

    def elaborate(self, platform):
        m = Module()
        if self.storage == "verilog":
            m.submodules.ram = Instance(
                LANE_RAM_MODULE, p_WIDTH=self.data.shape.width, p_DEPTH=self.data.depth,
                p_AW=self.addr_bits, i_clk=ClockSignal(), i_addr=self.addr, i_wdata=self.wdata,
                i_we=self.we, o_rdata=self.rdata)
            return m
        m.submodules.ram = mem = Memory(self.data)
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")
        m.d.comb += [wr.addr.eq(self.addr), wr.data.eq(self.wdata), wr.en.eq(self.we),
                     rd.addr.eq(self.addr), rd.en.eq(~self.we)]
        m.d.sync += self.rdata.eq(rd.data)
        return m
