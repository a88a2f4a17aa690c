"""One lane of the memory's storage: a single-port RAM organized for the FPGA's block RAM."""

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Instance, MemoryData, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

__all__ = ["LaneRAM", "LaneOrganization", "lane_ram_verilog", "organize", "LANE_RAM_MODULE",
           "DP16KD_SHAPES"]

#: Name of the Verilog module of :func:`lane_ram_verilog`.
LANE_RAM_MODULE = "stepforge_lane_ram"

#: ECP5 ``DP16KD`` single-port organizations: (data bits, rows).
DP16KD_SHAPES = ((18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384))


@dataclass(frozen=True)
class LaneOrganization:
    """How a lane of ``width`` bits and ``depth`` rows is cut into block RAMs.

    ``slice`` bits wide and ``rows`` deep each; ``banks = ceil(depth / rows)`` of them deep and
    ``ceil(width / slice)`` wide. The last bank may be organized differently, ``tail_slice``
    bits wide and ``tail_rows <= rows`` deep (by default as the others): it holds only the rows
    past the full banks. ``latency`` is the lane's read latency: 2 (the block RAM's register,
    then one flip-flop fed straight by it) for one bank; 4 for several: an input stage (the row,
    the data and each bank's decoded write enable in registers, so the memory's stage S drives a
    lane's registers instead of every block's write enable through the bank decoder: 168
    ``DP16KD`` at SwiGLU I=256, a 12.5 ns path), the block RAM, each bank's output in a
    flip-flop, then the bank multiplexer into the output register. No logic ever follows a
    block RAM's slow output (5.8 ns on ECP5 speed 6) in the same cycle.
    """
    slice: int
    rows: int
    banks: int
    tail_slice: int = None
    tail_rows: int = None

    @property
    def last(self):
        """``(slice, rows)`` of the last bank."""
        return (self.tail_slice or self.slice, self.tail_rows or self.rows)

    @property
    def latency(self):
        # several banks: the input stage, and the bank multiplexer's cycle
        return 2 if self.banks == 1 else 2 + self.input_stages + 1

    @property
    def input_stages(self):
        """Register stages in front of the block RAMs: 1 with several banks, else 0."""
        return 0 if self.banks == 1 else 1

    def blocks(self, width):
        """Block RAMs of a lane ``width`` bits wide."""
        return (-(-width // self.slice) * (self.banks - 1)
                + -(-width // self.last[0]))


#: The lane module's ports, address split and (with several banks) input stage, the same in both
#: of its forms; ``{stage_init}`` is the input registers' initial block, if any.
_HEADER = "module " + LANE_RAM_MODULE + """ #(parameter WIDTH = 64, parameter DEPTH = 16, parameter AW = 4,
                           parameter SLICE = 64, parameter ROWS = 16, parameter BANKS = 1,
                           parameter TSLICE = SLICE, parameter TROWS = ROWS) (
  input clk, input [AW-1:0] addr, input [WIDTH-1:0] wdata, input we, output [WIDTH-1:0] rdata);
  localparam RB = ROWS > 1 ? $clog2(ROWS) : 1;
  localparam BB = BANKS > 1 ? $clog2(BANKS) : 1;
  wire [RB-1:0] row;
  wire [BB-1:0] bank;
  wire [WIDTH-1:0] wdata_in;
  wire [BANKS-1:0] bank_wes;
  generate if (BANKS > 1) begin : banked   // ROWS is a power of two
    // stage A: the row, the data and each bank's write enable in registers, so no path fans
    // one signal out through the bank decoder to every block of the lane in the cycle
    reg [AW-1:0] addr_a;
    reg [WIDTH-1:0] wdata_a;
    reg [BANKS-1:0] we_a;{stage_init}
    integer k;
    always @(posedge clk) begin
      addr_a <= addr;
      wdata_a <= wdata;
      for (k = 0; k < BANKS; k = k + 1) we_a[k] <= we && addr[AW-1:RB] == k;
    end
    assign row = addr_a[RB-1:0];
    assign bank = addr_a[AW-1:RB];
    assign wdata_in = wdata_a;
    assign bank_wes = we_a;
  end else begin : single
    assign row = addr;
    assign bank = 0;
    assign wdata_in = wdata;
    assign bank_wes = we;
  end endgenerate
"""

#: The start of a bank's block in both forms: its shape (the last bank's may differ), its row
#: address and the write data padded to whole slices.
_BANK = """    localparam SL = b == BANKS - 1 ? TSLICE : SLICE;
    localparam RW = b == BANKS - 1 ? TROWS : ROWS;
    localparam NS = (WIDTH + SL - 1) / SL;
    localparam RWB = RW > 1 ? $clog2(RW) : 1;
    wire [RWB-1:0] brow = row[RWB-1:0];
    wire [NS*SL-1:0] wpad;
    assign wpad[WIDTH-1:0] = wdata_in;
    if (NS*SL > WIDTH) begin : pad
      assign wpad[NS*SL-1:WIDTH] = {(NS*SL-WIDTH){1'b0}};
    end
    wire [NS*SL-1:0] q_all;
"""

def organize(family, width, depth):
    """The :class:`LaneOrganization` of a lane for ``family``.

    On ECP5 the ``DP16KD`` organization (:data:`DP16KD_SHAPES`) that needs the fewest block
    RAMs, then the fewest banks (each bank beyond the first costs a bank multiplexer per bit):
    a 32-bit lane of 4,096 rows is eight 4-bit slices one bank deep (no bank multiplexer); of
    4,176 rows (GEMV 256x256), eight 4-bit slices for the first 4,096 rows and two 18-bit slices
    for the last 80 (10 blocks in 2 banks, where two 18-bit slices five banks deep are 10 blocks
    in 5). Elsewhere the whole word in one bank (a 16-bit iCE40 lane maps to
    ``SB_SPRAM256KA``).
    """
    if family != "ecp5":
        return LaneOrganization(width, depth, 1)
    best = None
    for bits, rows in DP16KD_SHAPES:
        bits = min(bits, width)
        banks = -(-depth // rows)
        if banks == 1:
            candidates = [LaneOrganization(bits, min(rows, depth), 1)]
        else:
            # the rows past the full banks (``tail``) in a last bank of any shape that holds them
            # and is no deeper than the others
            tail = depth - (banks - 1) * rows
            candidates = [LaneOrganization(bits, rows, banks,
                                           *(() if (tb, tail) == (bits, rows) else (tb, tail)))
                          for tb in (min(b, width) for b, r in DP16KD_SHAPES
                                     if tail <= r <= rows)]
        for org in candidates:
            cost = (org.blocks(width), org.banks)
            if best is None or cost < best[0]:
                best = (cost, org)
    return best[1]


def lane_ram_verilog(zero_init=True, family=None, primitives=False):
    """The Verilog of the storage of one lane for ``storage="verilog"``.

    ``ceil(WIDTH / SLICE)`` single-port RAMs of ``ROWS x SLICE`` bits in each of ``BANKS``
    banks, the last bank ``ceil(WIDTH / TSLICE)`` RAMs of ``TROWS x TSLICE`` (the
    :class:`LaneOrganization`), each with a registered read that keeps its value in a cycle that
    writes it ("no change": the memory never uses a lane's read in the cycle it writes the lane;
    ``DP16KD`` and iCE40 ``SB_SPRAM256KA`` read ports behave that way), then flip-flops fed
    straight by the block RAMs and, with several banks, the bank multiplexer into one more
    register; several banks also have an input stage in front (the row, the data and one write
    enable per bank in registers, :class:`LaneOrganization`). Yosys maps each RAM to one block
    RAM.

    Amaranth writes every initial word of a ``lib.memory`` into its Verilog, so a memory of
    hundreds of kilobytes would make a Verilog file of hundreds of thousands of lines; this module
    keeps it to a loop. ``zero_init`` (the simulation target) clears the words at time zero; a
    board build leaves them uninitialized (SPRAM has no initial contents). For ``family="ice40"``
    the RAMs carry ``ram_style = "huge"``, so Yosys puts them in ``SB_SPRAM256KA`` even where
    block RAM would be cheaper by its measure (the SPRAMs are otherwise unused, the 30 EBR are
    scarce). Append the text to the design's Verilog.

    ``primitives`` (a board build for ``family="ecp5"``) instantiates each RAM as a ``DP16KD``
    with its output register on (``REGMODE "OUTREG"``), which takes the place of the flip-flop
    fed by the block RAM: the same latency, and the block RAM's slow output (5.8 ns on speed 6,
    the limit of an inferred design near 113 MHz) ends in its own register instead of crossing
    the fabric. See :func:`_dp16kd_lane_verilog`.
    """
    if primitives:
        if family != "ecp5":
            raise ValueError(f"lane_ram_verilog: primitives exist for family 'ecp5' only, "
                             f"not {family!r}")
        if zero_init:
            raise ValueError("lane_ram_verilog: primitives are for a board build "
                             "(zero_init=False)")
        return _dp16kd_lane_verilog()
    def init(body):
        return f"\n    initial begin\n{body}    end" if zero_init else ""
    ram_init = init("      for (i = 0; i < RW; i = i + 1) mem[i] = {SL{1'b0}};\n"
                    "      q = {SL{1'b0}};\n")
    out_init = init("      rdata_q = {WIDTH{1'b0}};\n      bank_q = 0;\n      bank_qq = 0;\n")
    bank_init = init("      held = {WIDTH{1'b0}};\n")
    header = _HEADER.replace("{stage_init}", init("      addr_a = 0;\n      wdata_a = 0;\n"
                                                  "      we_a = 0;\n"))
    declare_i = "\n      integer i;" if zero_init else ""
    style = '(* ram_style = "huge" *) ' if family == "ice40" else ""
    return f"""
{header}  wire [BANKS*WIDTH-1:0] bank_words;
  reg [WIDTH-1:0] rdata_q;
  reg [BB-1:0] bank_q;
  reg [BB-1:0] bank_qq;{out_init}
  genvar b, s;
  generate for (b = 0; b < BANKS; b = b + 1) begin : bank_
{_BANK}    for (s = 0; s < NS; s = s + 1) begin : slice{declare_i}
      {style}reg [SL-1:0] mem [0:RW-1];
      reg [SL-1:0] q;{ram_init}
      always @(posedge clk) begin
        if (bank_wes[b]) mem[brow] <= wpad[s*SL +: SL];
        else q <= mem[brow];
      end
      assign q_all[s*SL +: SL] = q;
    end
    if (BANKS > 1) begin : hold
      reg [WIDTH-1:0] held;{bank_init}
      always @(posedge clk) held <= q_all[WIDTH-1:0];
      assign bank_words[b*WIDTH +: WIDTH] = held;
    end else begin : direct
      assign bank_words[b*WIDTH +: WIDTH] = q_all[WIDTH-1:0];
    end
  end endgenerate
  always @(posedge clk) begin
    bank_q <= bank;
    bank_qq <= bank_q;
    rdata_q <= bank_words[(BANKS > 1 ? bank_qq : 0)*WIDTH +: WIDTH];
  end
  assign rdata = rdata_q;
endmodule
"""


def _dp16kd_ports(prefix, wire, width):
    """``.PREFIX0(wire[0]), ...`` (``1'b0`` for every pin without a ``wire``), six to a line."""
    pins = [f".{prefix}{i}({wire}[{i}])" if wire else f".{prefix}{i}(1'b0)" for i in range(width)]
    return "".join("      " + ", ".join(pins[i:i + 6]) + ",\n" for i in range(0, width, 6))


def _dp16kd_lane_verilog():
    """:func:`lane_ram_verilog`'s module with each RAM a ``DP16KD`` primitive (port A only).

    The slice's ``DATA_WIDTH`` is the smallest of 1, 2, 4, 9, 18 that holds ``SLICE`` bits
    (:data:`DP16KD_SHAPES`); its row sits in the address pins above the ones that width leaves
    unused (``AD[13:4]`` at 18 bits, whose ``AD[1:0]`` are the byte enables, both the write enable;
    ``AD[13:3]`` at 9, ``AD[13:2]`` at 4, ``AD[13:1]`` at 2, all 14 at 1), as Lattice's memory
    guide and Yosys's own ``DP16KD`` mapping place it. ``WRITEMODE "NORMAL"`` keeps the read
    data in a cycle that writes (the "no change" of the inferred module), ``REGMODE "OUTREG"``
    registers it once more inside the block: the inferred module's first flip-flop.
    """
    header = _HEADER.replace("{stage_init}", "")
    return f"""
{header}  wire [BANKS*WIDTH-1:0] bank_words;
  genvar b, s;
  generate for (b = 0; b < BANKS; b = b + 1) begin : bank_
{_BANK}    localparam DW = SL <= 1 ? 1 : SL <= 2 ? 2 : SL <= 4 ? 4 : SL <= 9 ? 9 : 18;
    localparam SHIFT = DW == 1 ? 0 : DW == 2 ? 1 : DW == 4 ? 2 : DW == 9 ? 3 : 4;
    wire [13:0] row14 = brow;   // zero-extended
    wire [13:0] ad = row14 << SHIFT;
    wire bank_we = bank_wes[b];
    for (s = 0; s < NS; s = s + 1) begin : slice
      wire [17:0] di = wpad[s*SL +: SL];   // zero-extended
      wire [17:0] do_;
      // at 18 bits AD[1:0] are the byte enables: both follow the write enable, as Yosys wires them
      wire [13:0] ad_s = DW == 18 ? {{ad[13:2], bank_we, bank_we}} : ad;
      DP16KD #(.DATA_WIDTH_A(DW), .DATA_WIDTH_B(DW), .REGMODE_A("OUTREG"), .REGMODE_B("NOREG"),
               .WRITEMODE_A("NORMAL"), .WRITEMODE_B("NORMAL"), .CSDECODE_A("0b000"),
               .CSDECODE_B("0b000"), .RESETMODE("SYNC"), .ASYNC_RESET_RELEASE("SYNC"),
               .GSR("DISABLED")) ram (
      .CLKA(clk), .CEA(1'b1), .OCEA(1'b1), .WEA(bank_we), .RSTA(1'b0),
      .CSA0(1'b0), .CSA1(1'b0), .CSA2(1'b0),
{_dp16kd_ports("ADA", "ad_s", 14)}{_dp16kd_ports("DIA", "di", 18)}{_dp16kd_ports("DOA", "do_", 18)}\
      .CLKB(1'b0), .CEB(1'b0), .OCEB(1'b0), .WEB(1'b0), .RSTB(1'b0),
      .CSB0(1'b0), .CSB1(1'b0), .CSB2(1'b0),
{_dp16kd_ports("ADB", None, 14)}{_dp16kd_ports("DIB", None, 18)}\
      .DOB0());
      assign q_all[s*SL +: SL] = do_[SL-1:0];
    end
    assign bank_words[b*WIDTH +: WIDTH] = q_all[WIDTH-1:0];
  end endgenerate
  generate if (BANKS > 1) begin : mux
    reg [BB-1:0] bank_q;
    reg [BB-1:0] bank_qq;
    reg [WIDTH-1:0] rdata_q;
    always @(posedge clk) begin
      bank_q <= bank;
      bank_qq <= bank_q;
      rdata_q <= bank_words[bank_qq*WIDTH +: WIDTH];
    end
    assign rdata = rdata_q;
  end else begin : direct
    assign rdata = bank_words[WIDTH-1:0];
  end endgenerate
endmodule
"""


class LaneRAM(wiring.Component):
    """The storage of one memory lane: ``depth`` words, one access per cycle, read in
    :attr:`latency` cycles.

    Parameters
    ----------
    data : amaranth.hdl.MemoryData
        The words (``storage="amaranth"``: the simulator's back door reaches them through it).
    storage : {"amaranth", "verilog"}
        ``"amaranth"``: a :class:`~amaranth.lib.memory.Memory`; ``"verilog"``: an instance of
        :func:`lane_ram_verilog`'s module.
    family : {None, "ecp5", "ice40"}
        Organize the RAM for this FPGA family's block RAM (:func:`organize`); the Amaranth
        storage has the same latency.

    Members
    -------
    addr : ``In(range(depth))``
        The row read (and written, with ``we``) at the next clock edge.
    we : ``In(1)``
    wdata : ``In(width)``
    rdata : ``Out(width)``
        The row addressed :attr:`latency` cycles earlier, if that cycle did not write (else the
        word before).
    """

    def __init__(self, data, storage, family=None):
        if not isinstance(data, MemoryData):
            raise TypeError(f"LaneRAM data must be a MemoryData, not {data!r}")
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"LaneRAM storage must be 'amaranth' or 'verilog', not {storage!r}")
        self.data, self.storage, self.family = data, storage, family
        width = data.shape.width
        self.organization = organize(family, width, data.depth)
        self.addr_bits = max(1, ceil_log2(data.depth))
        super().__init__({"addr": In(unsigned(self.addr_bits)), "we": In(1),
                          "wdata": In(width), "rdata": Out(width)})

    @property
    def latency(self):
        """Cycles from ``addr`` to ``rdata``."""
        return self.organization.latency

    def __repr__(self):
        return f"LaneRAM({self.data!r}, {self.storage!r}, {self.family!r})"

    def elaborate(self, platform):
        m = Module()
        org = self.organization
        if self.storage == "verilog":
            m.submodules.ram = Instance(
                LANE_RAM_MODULE, p_WIDTH=self.data.shape.width, p_DEPTH=self.data.depth,
                p_AW=self.addr_bits, p_SLICE=org.slice, p_ROWS=org.rows, p_BANKS=org.banks,
                p_TSLICE=org.last[0], p_TROWS=org.last[1],
                i_clk=ClockSignal(), i_addr=self.addr, i_wdata=self.wdata, i_we=self.we,
                o_rdata=self.rdata)
            return m
        m.submodules.ram = mem = Memory(self.data)
        wr = mem.write_port()
        rd = mem.read_port(domain="sync")
        addr, wdata, we = self.addr, self.wdata, self.we
        if org.input_stages:   # the Verilog module's stage A
            addr, wdata, we = (Signal.like(addr, name="addr_a"),
                               Signal.like(wdata, name="wdata_a"), Signal(name="we_a"))
            m.d.sync += [addr.eq(self.addr), wdata.eq(self.wdata), we.eq(self.we)]
        m.d.comb += [wr.addr.eq(addr), wr.data.eq(wdata), wr.en.eq(we),
                     rd.addr.eq(addr), rd.en.eq(~we)]
        word = rd.data
        for k in range(1 + org.input_stages, self.latency):
            nxt = Signal.like(self.rdata, name=f"rdata_stage{k}")
            m.d.sync += nxt.eq(word)
            word = nxt
        m.d.comb += self.rdata.eq(word)
        return m
