"""Hardware parameters of a generated stepforge machine, with presets per target."""

import dataclasses
from dataclasses import dataclass

from ..compiler.types import DType, fp32, int8, int16, int32

__all__ = ["HardwareConfig", "FAMILIES", "MEMORIES"]

#: Rows of an iCE40 ``SB_SPRAM256KA`` (16 bits each).
SPRAM_ROWS = 16384

#: Where a :class:`HardwareConfig` keeps the program's tensors: ``"bram"``, the banked lanes of
#: :class:`~stepforge.hdl.memory.MemoryModel` (on-chip block RAM on a board); ``"sdram"``, an SDRAM
#: chip behind :class:`~stepforge.hdl.memory.sdram_memory.SDRAMMemory` (the ULX3S's 32 MB).
MEMORIES = ("bram", "sdram")

#: The FPGA families a :class:`HardwareConfig` can organize its block RAMs for.
FAMILIES = (None, "ecp5", "ice40")


def _check_int(name, value, minimum, what=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"HardwareConfig.{name} must be an int, not {value!r}")
    if value < minimum:
        raise ValueError(f"HardwareConfig.{name} must be >= {what or minimum}, not {value}")


@dataclass(frozen=True)
class HardwareConfig:
    """Parameters of the hardware that a STeP program is lowered to.

    A hardware element is a ``tile_rows x tile_cols`` tile of ``dtype`` moved in one beat
    (architecture section 3); larger or dynamic STeP tiles are lowered onto it by hierarchical
    tiling.

    Parameters
    ----------
    tile_rows, tile_cols : int
        Shape of the hardware tile (``>= 1``).
    dtype : stepforge.compiler.types.DType
        Element type of the hardware tile.
    acc_dtype : stepforge.compiler.types.DType, optional
        Accumulator type of the PCUs' multiply-accumulate: ``int32`` for an integer ``dtype`` and
        ``fp32`` for a float one unless given. Must be of the same kind as ``dtype`` (integer or
        float) and at least as wide.
    pcu_lanes : int
        SIMD lanes of one PCU (``>= 1``).
    pcu_multipliers : int
        Multipliers of one PCU (``>= pcu_lanes``); a PCU's initiation interval is
        ``ceil(multiplies per beat / pcu_multipliers)``.
    fifo_depth : int, default 2
        Default depth of an edge FIFO before the FIFO sizing pass (``>= 1``; depth 1 halves a
        stream's throughput, see :class:`~stepforge.hdl.fifo.StreamFIFO`).
    mem_channels : int
        Channels of the off-chip memory port (``>= 1``).
    mem_bytes_per_channel : int
        Bytes one channel moves per cycle (``>= 1``).
    mem_latency : int
        Cycles from a memory request to its data (``>= 0``).
    clock_hz : int
        Target clock frequency in Hz (``>= 1``).
    family : {None, "ecp5", "ice40"}
        The FPGA family the memory's block RAMs are organized for (None: a generic RAM per
        lane). ``"ecp5"`` cuts each lane into bit slices as wide as a ``DP16KD`` of the lane's
        depth holds (18 bits up to 1,024 rows, 9 up to 2,048, 4, 2, 1), so no multiplexer of
        block RAM outputs sits on the read path; ``"ice40"`` keeps whole words (a 16-bit lane
        maps to ``SB_SPRAM256KA``).
    memory : {"bram", "sdram"}, default "bram"
        Where the tensors live (:data:`MEMORIES`): ``"bram"``, the banked memory of word lanes
        (every tensor on chip); ``"sdram"``, the board's SDRAM chip (16 bits a cycle, a latency
        that follows its rows and refreshes; ``mem_channels * mem_bytes_per_channel`` should
        then be 2, the chip's bytes per cycle, so the roofline and the ports' lines say what
        the chip moves).
    fifo_block_ram_width : int, optional
        An edge FIFO of 2 entries or more whose beat is at least this many bits wide keeps its
        beats in block RAM (:class:`~stepforge.hdl.fifo.StreamFIFO` with ``buffered`` and
        ``block_ram``, at least 3 entries so that it moves a beat a cycle; a beat waits one
        cycle more). None (the default): edge FIFOs of fewer than 8 entries are registers.
        The :meth:`ice40_up5k` preset sets 128, the beat of a 4x4 int8 tile: on the UP5K logic
        cells run out first, and such a FIFO's two registers and multiplexer cost about 370
        of its 5,280 cells against 9 of its 30 ``SB_RAM40_4K``.
    fifo_block_rams : int, optional
        The block RAMs that those FIFOs may take in all, the widest beats first
        (:func:`~stepforge.compiler.lower.fifo_storage`); None (the default): no limit. The
        :meth:`ice40_up5k` preset sets 12, two fifths of the UP5K's, so that a program whose
        units need the block RAMs keeps them.

    Every parameter after ``dtype`` defaults to the value of the :meth:`sim` preset.

    Raises
    ------
    ValueError
        A parameter of the wrong type or out of range; the message names the parameter.
    """

    tile_rows: int
    tile_cols: int
    dtype: DType
    acc_dtype: DType | None = None
    pcu_lanes: int = 4
    pcu_multipliers: int = 16
    fifo_depth: int = 2
    mem_channels: int = 4
    mem_bytes_per_channel: int = 16
    mem_latency: int = 4
    clock_hz: int = 100_000_000
    family: str | None = None
    memory: str = "bram"
    fifo_block_ram_width: int | None = None
    fifo_block_rams: int | None = None

    def __post_init__(self):
        _check_int("tile_rows", self.tile_rows, 1)
        _check_int("tile_cols", self.tile_cols, 1)
        if not isinstance(self.dtype, DType):
            raise ValueError(f"HardwareConfig.dtype must be a DType (int8, int16, int32, bf16, "
                             f"fp32), not {self.dtype!r}")
        if self.acc_dtype is None:
            object.__setattr__(self, "acc_dtype", fp32 if self.dtype.is_float else int32)
        for name in ("dtype", "acc_dtype"):
            if not isinstance(getattr(self, name), DType):
                raise ValueError(f"HardwareConfig.{name} must be a DType (int8, int16, int32, bf16, "
                                 f"fp32), not {getattr(self, name)!r}")
        if self.acc_dtype.is_float != self.dtype.is_float:
            raise ValueError(f"HardwareConfig.acc_dtype {self.acc_dtype!r} must be "
                             f"{'a float' if self.dtype.is_float else 'an integer'} type like "
                             f"dtype {self.dtype!r}")
        if self.acc_dtype.bits < self.dtype.bits:
            raise ValueError(f"HardwareConfig.acc_dtype {self.acc_dtype!r} is narrower than "
                             f"dtype {self.dtype!r}")
        _check_int("pcu_lanes", self.pcu_lanes, 1)
        _check_int("pcu_multipliers", self.pcu_multipliers, self.pcu_lanes,
                   f"pcu_lanes ({self.pcu_lanes})")
        _check_int("fifo_depth", self.fifo_depth, 1)
        _check_int("mem_channels", self.mem_channels, 1)
        _check_int("mem_bytes_per_channel", self.mem_bytes_per_channel, 1)
        _check_int("mem_latency", self.mem_latency, 0)
        _check_int("clock_hz", self.clock_hz, 1)
        if self.fifo_block_ram_width is not None:
            _check_int("fifo_block_ram_width", self.fifo_block_ram_width, 1)
        if self.fifo_block_rams is not None:
            _check_int("fifo_block_rams", self.fifo_block_rams, 0)
        if self.memory not in MEMORIES:
            raise ValueError(f"HardwareConfig.memory must be one of "
                             f"{', '.join(map(repr, MEMORIES))}, not {self.memory!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"HardwareConfig.family must be one of "
                             f"{', '.join(map(repr, FAMILIES))}, not {self.family!r}")

    def __repr__(self):
        # ``memory`` and the block-RAM FIFOs' fields are shown only when they are not the
        # default, so the repr of every config before they existed (and every cache key made
        # from one) stays the same
        defaults = {"memory": "bram", "fifo_block_ram_width": None, "fifo_block_rams": None}
        fields = [f for f in dataclasses.fields(self)
                  if f.name not in defaults or getattr(self, f.name) != defaults[f.name]]
        return f"HardwareConfig({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in fields)})"

    @classmethod
    def ulx3s_sdram(cls):
        """The ECP5-85F of the ULX3S with the tensors in the board's SDRAM (32 MB, 16 bits).

        The units are the :meth:`ecp5_85f` preset's; the memory is
        :class:`~stepforge.hdl.memory.sdram_memory.SDRAMMemory`, one 2-byte lane (what the chip
        moves a cycle at best) with a nominal latency of 10 cycles (the controller's command,
        the chip's CAS latency of 3 and the pins' registers; a row change or a refresh adds
        more), and the clock is 100 MHz. For programs whose tensors do not fit the chip's
        468 KB of block RAM (SwiGLU at the paper's size).

        Returns
        -------
        HardwareConfig
        """
        return cls.ecp5_85f().replace(memory="sdram", mem_channels=1, mem_bytes_per_channel=2,
                                      mem_latency=10, clock_hz=100_000_000)

    @property
    def tile_elems(self):
        """Elements of one hardware tile."""
        return self.tile_rows * self.tile_cols

    @property
    def tile_bytes(self):
        """Bytes of one hardware tile."""
        return self.tile_elems * self.dtype.nbytes

    @property
    def mem_bytes_per_cycle(self):
        """Peak off-chip bytes per cycle over all channels."""
        return self.mem_channels * self.mem_bytes_per_channel

    @property
    def fixed_memory_bytes(self):
        """Bytes the memory's RAMs hold whatever the program needs, or None when the RAMs are
        sized to the program: on ``family="ice40"`` every lane is ``SB_SPRAM256KA`` of 16K rows
        (128 KB for the preset's four 16-bit lanes), so memory below that costs nothing."""
        if self.family == "ice40":
            return SPRAM_ROWS * self.mem_bytes_per_cycle
        return None

    def with_tile(self, tile):
        """A copy with the hardware tile ``tile = (rows, cols)``, or this config for None."""
        if tile is None:
            return self
        rows, cols = tile
        return self.replace(tile_rows=rows, tile_cols=cols)

    def replace(self, **changes):
        """A copy with ``changes`` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def sim(cls):
        """The simulation-scale machine: 4x4 int16 tiles, 16 multipliers, 4 x 16 B channels.

        Returns
        -------
        HardwareConfig
        """
        return cls(tile_rows=4, tile_cols=4, dtype=int16, acc_dtype=int32,
                   pcu_lanes=4, pcu_multipliers=16, fifo_depth=2,
                   mem_channels=4, mem_bytes_per_channel=16, mem_latency=4,
                   clock_hz=100_000_000)

    @classmethod
    def ice40_up5k(cls, dtype=int16):
        """The iCE40 UP5K (iCEBreaker): 2x2 tiles, its 8 MAC16 as the 8 multipliers of a PCU.

        A GEMM beat (``[2, 2] @ [2, 2]``, 8 products) keeps all 8 MAC16 busy at one beat per
        cycle; a GEMV beat (``[1, 2] @ [2, 2]``) uses 4. **Decision:** 4x4 tiles would keep the 8
        MAC16 busy for GEMV too (16 products in 2 cycles, half the cycles), but their 128- and
        512-bit beats make GEMV 256x256 need about 7,200 logic cells and GEMM 64^3 about 6,800
        LUT4 and 7,400 FF, more than the UP5K's 5,280; with 2x2 tiles both fit (measured with
        ``synth_ice40 -dsp -spram``, board target). ``family="ice40"`` also splits the PCUs'
        32-bit running sums into 16-bit halves (:class:`~stepforge.hdl.pcu.PCU`) and puts the
        memory lanes in SPRAM. Edge FIFOs of beats 128 bits wide or more keep them in block RAM
        (``fifo_block_ram_width``): with ``with_tile((4, 4))`` GEMV 256x256's weight stream
        takes 9 ``SB_RAM40_4K`` instead of about 370 logic cells (4,219 -> 3,852 LC).

        Memory is four 16-bit lanes, one SPRAM each (8 bytes per cycle, 128 KB), with a latency
        of 4 cycles (the memory's pipeline); the clock is the board's 12 MHz oscillator (no PLL).

        Parameters
        ----------
        dtype : DType, default ``int16``
            ``int8`` or ``int16`` (one MAC16 multiplies 16 x 16 bits).

        Returns
        -------
        HardwareConfig
        """
        if dtype not in (int8, int16):
            raise ValueError(f"the iCE40 UP5K preset supports int8 and int16 tiles, not {dtype!r}")
        return cls(tile_rows=2, tile_cols=2, dtype=dtype, acc_dtype=int32,
                   pcu_lanes=2, pcu_multipliers=8, fifo_depth=2,
                   mem_channels=4, mem_bytes_per_channel=2, mem_latency=4,
                   clock_hz=12_000_000, family="ice40", fifo_block_ram_width=128,
                   fifo_block_rams=12)

    @classmethod
    def ecp5_85f(cls):
        """The ECP5-85F (ULX3S, OrangeCrab): 4x4 int16 tiles, 16 of its 156 MULT18X18D per PCU.

        Memory is two channels of 8 bytes per cycle in block RAM (``DP16KD``) with a latency of
        6 cycles (the memory's pipeline with lanes of several block RAM banks: an input stage in
        front of the blocks and a bank multiplexer behind them); the clock target
        is 50 MHz (generated GEMV and GEMM place and route at about 95-115 MHz).

        Returns
        -------
        HardwareConfig
        """
        return cls(tile_rows=4, tile_cols=4, dtype=int16, acc_dtype=int32,
                   pcu_lanes=4, pcu_multipliers=16, fifo_depth=2,
                   mem_channels=2, mem_bytes_per_channel=8, mem_latency=6,
                   clock_hz=50_000_000, family="ecp5")
