"""The memory system: a banked memory of word lanes behind burst ports, pipelined for FPGAs.

Geometry
--------
The memory is addressed in **words** of ``word_bytes`` bytes. A channel moves
``mem_bytes_per_channel`` bytes per cycle, so the ``mem_channels`` channels together form
``lanes = mem_channels * mem_bytes_per_channel / word_bytes`` word lanes (a power of two): one
*line* of up to ``lanes`` words moves per cycle. Word ``w`` lives in lane ``w % lanes``, row
``w // lanes``; any ``lanes`` consecutive words sit in distinct lanes, so a line starting at any
word address is read or written in one cycle. Each lane is a single-port block RAM
(:class:`~stepforge.hdl.memory.lane_ram.LaneRAM`: ``DP16KD`` on ECP5, ``SB_SPRAM256KA`` or
``SB_RAM40_4K`` on iCE40). ``word_bytes`` defaults to ``gcd(mem_bytes_per_channel, tile_cols *
bytes(dtype))``, so a hardware tile row is a whole number of words; bytes inside a word are
little-endian.

Ports
-----
A client owns one :class:`MemoryPort` whose every request is a burst of one shape, fixed when
the design is built: ``rows`` segments of ``count`` words, ``stride`` words apart (a tile of a
row-major tensor: one segment per tile row, :class:`TensorPlacement`). A request carries only the
burst's first word address. :meth:`MemoryGeometry.burst_lines` cuts a burst into lines (the same
rule in Python and in hardware): a segment longer than ``lanes`` words goes out alone, ``lanes``
words per line; shorter segments are packed whole, as many per line as fit in distinct lanes (at
most ``max_segments``).

* Read port: ``req`` (stream of ``addr``) and ``resp`` (no back-pressure: ``valid``, ``count`` of
  words in the line, ``last`` line of the burst, ``data``: words ``0..count-1`` of the line in
  order; the words past them are unspecified). Lines arrive in request order, each ``mem_latency`` cycles after the
  cycle it was granted. A client must absorb every line it asked for.
* Write port: ``req`` as for reads and ``data``, a stream of lines cut exactly as a read of the
  same burst returns them; the memory takes a line (``data.ready``) in the cycle it grants it. A
  write is visible to every read granted in a later cycle.

A port may also declare the lane its requests' first word always sits in (``start_lane``,
:attr:`TensorPlacement.start_lane`); when that fixes the lane of every word of its lines
(:func:`fixed_sel`), the memory routes the client's words with fixed wiring instead of the lane
crossbar (for writes when every write client is fixed, likewise for reads).

``req.ready`` comes from a register (a two-entry request queue per client), so a client may issue
a burst every cycle. A burst's first line is offered to the arbiter two cycles after its request
is accepted.

Pipeline
--------
Every stage is registered, so no path runs from a client through the arbiter to the RAMs:

1. **Lines** (:class:`~stepforge.hdl.memory.lines.LineGenerator`, one per client): the next line
   of the client's burst, with the row of every lane, which lanes move a word and which word each
   lane takes (writes) or each response word comes from (reads), from constant tables of the
   port's burst shape and one adder per lane: no multiplier and no division in any address path.
2. **Grant** (:class:`~stepforge.hdl.memory.arbiter.RoundRobin`): one line per cycle, round robin
   over the clients with a line ready (and, for a writer, its data), into the stage-S register.
3. **Storage**: the lanes read or write their rows; a read is registered in the block RAM and
   once more in flip-flops fed straight by it (two cycles; four for a lane of several block
   RAM banks, whose row, data and per-bank write enables wait a cycle in registers in front of
   the blocks and whose outputs are multiplexed in a cycle of their own).
4. **Gather**: each response word selects its lane, into the response register.

``mem_latency`` (at least :data:`PIPELINE_LATENCY` = 4, or 6 with banked lanes) is the cycles
from grant to response;
a larger value adds register stages after the gather (a DRAM-like latency for simulation).
``stall`` blocks every grant in a cycle (tests drive it at random to model contention).

Counters and the word port
--------------------------
``bytes_read`` and ``bytes_written`` add ``count * word_bytes`` for every granted client line:
exactly the bytes the clients asked for. The ``debug`` word port (:data:`DebugSignature`) reads or
writes one word per cycle with priority over the clients (an access waits one cycle in a
register stage, and no line is granted in the cycle it leaves it); a read's word arrives
``mem_latency + 1`` cycles later with ``rvalid``. It is how a host (and
the simulation's preload) fills and reads tensors; its accesses are not counted. In Amaranth's
simulator :func:`backdoor_read` / :func:`backdoor_write` reach the storage in zero time.
"""

from .arbiter import RoundRobin
from .geometry import MemoryGeometry, check_count, index_shape, quiet_on_error, times_const
from .host import array_from_bytes, array_to_bytes, backdoor_read, backdoor_write
from .lane_ram import LaneOrganization, LaneRAM, lane_ram_verilog, organize
from .lines import LineGenerator, LineLayout, line_tables, fixed_sel
from .model import PIPELINE_LATENCY, MemoryModel
from .placement import TensorPlacement, word_addresses
from .port import DebugSignature, MemoryPort, ResponseSignature, client_ports, client_shapes

#: The lane storage module of the simulation target (zero-initialized); see
#: :func:`lane_ram_verilog`.
LANE_RAM_VERILOG = lane_ram_verilog(zero_init=True)

__all__ = ["MemoryGeometry", "MemoryPort", "ResponseSignature", "DebugSignature", "MemoryModel",
           "TensorPlacement", "word_addresses", "LineGenerator", "LineLayout", "RoundRobin",
           "LaneRAM", "LaneOrganization", "organize",
           "PIPELINE_LATENCY", "LANE_RAM_VERILOG", "lane_ram_verilog", "line_tables", "fixed_sel",
           "array_to_bytes", "array_from_bytes", "backdoor_read", "backdoor_write",
           "index_shape", "quiet_on_error", "check_count", "times_const"]
