"""The PMU: on-chip memory implementing Bufferize and Streamify of one buffer stream.

A Bufferize and the Streamify nodes that replay its buffers share storage, so one
:class:`PMU` holds both sides (architecture section 3, semantics section 4 "On-chip memory",
``docs/memory.md``):

* the **write side** (Bufferize) takes the beats of ``in0``, stores each one as an *entry*
  ``(data, has_data, stop)`` and, on a stop ``s >= b``, closes the buffer and sends its id with
  stop ``s - b`` on ``refs``;
* each **read side** (one per Streamify consumer, :class:`Replay`) takes buffer ids on
  ``buffers`` (normally ``refs`` after whatever FIFOs and routing the program puts between the
  two nodes), optionally a reference stream on ``ref``, and replays the buffers' entries on
  ``out``: once (plain), ``repeat`` times, once per reference element, optionally in an affine
  order.

Storage
-------
Entries live in two memories organised as ``blocks`` blocks of ``block_size`` entries: a data
memory ``{data, has_data}`` (a :class:`~.data_ram.DataRAM`: a write stage, then a registered
read and an output register, the block RAM's own on an ECP5 board build) and a narrow stop
memory (a :class:`amaranth.lib.memory.Memory`, so that a
stop arriving in its own beat is merged into the entry of the element it follows by rewriting
the stop alone; stored buffers are therefore always in canonical framing). Both have one write
port (the write side) and one synchronous read port per read side. A wide element is spread
over as many block RAMs as its width needs by the synthesis tool (width banking); one write and
one read per cycle per read side need no further banking. These two memories, the only ones
sized by the entries, are read synchronously (registered, as block RAM needs). The tables of
``blocks`` entries (free list, descriptors, ``next``) are read asynchronously (distributed RAM or
registers): their address is known only in the cycle that needs the word (a command's buffer id
straight from ``buffers``, the arbiter's grant), so a registered read would cost a cycle.

Allocation. Free blocks sit in a free list (a FIFO of block numbers in a memory initialised to
``0 .. blocks-1``). A buffer is a chain of blocks linked through a ``next`` table; its id on
the wire is its first block. A descriptor table indexed by that block holds the buffer's entry
count, block count and whether it fills its static shape.

* ``mode="static"`` (N-buffering): ``slots`` blocks of ``prod(shape)`` entries, one buffer per
  block, no chaining: with the default ``slots=2`` the writer fills one buffer while a reader
  replays the other.
* ``mode="dynamic"`` (block allocator): ``blocks`` blocks of ``block_size`` entries; a buffer
  takes blocks as it grows. An empty free list stalls the writer (back-pressure); a buffer that
  exceeds its declared bound raises ``OVER_BOUND`` whatever the free list holds.

Bounds are checked exactly as the interpreter's ``check_buffer`` does, fibre by fibre and level
by level: a level-``k`` fibre longer than ``shape[b - 1 - k]`` (a static size or the declared
bound of a symbolic dimension) raises ``OVER_BOUND`` on the beat that overflows it. Because of
this check a buffer never holds more than ``prod(shape)`` entries.

Lifetimes and consumers
-----------------------
Every read side is one Streamify consumer; the reference count of a buffer is the number of
read sides, kept as one *pending* bit per read side and block. Closing a buffer sets its bits;
a read side clears its bit right after its last replay of the buffer (the final replay of a
buffer element, or the end of its repetition in the reference form, even after zero replays).
When the last bit clears, a walker returns the buffer's blocks to the free list, one block per
cycle. Releases of several read sides are taken one per cycle by a round-robin arbiter.

Decisions (hardware limits, each one detected rather than silently misread):

* A read side frees a buffer after each buffer element's last replay. A reference that comes
  back after its buffer was freed (an id repeated in one consumer's stream, which the
  interpreter allows by freeing after the *last* occurrence) raises ``BAD_BUFFER``. If the
  block was reused meanwhile the stale id cannot be told from the new buffer.
* ``buffers`` and ``ref`` take stops fused into the beat of the element they follow (the
  canonical framing, which ``refs`` always has); ``Done`` may be a bare beat. A stop-only beat
  right after an element beat without a stop raises ``BAD_STOP``: merging it would hold back
  the last beat of a replay until the next beat arrives, which deadlocks programs whose next
  buffer depends on this replay (an accumulation through a Bufferize loop). ``in0`` accepts any
  framing.
* A read side that never receives some buffer (a routing operator sent it to another
  consumer) clears its bits when its streams have ended, as the interpreter does: with several
  read sides, each one then sweeps its pending bits (one block per cycle) and releases what it
  still holds; buffers closed after that never wait for it. Until then such a buffer stays
  allocated, so a PMU whose references are *routed* (not broadcast) to several read sides needs
  room for every buffer in flight, or it stalls for good.

Timing
------
Write side: one beat per cycle, including buffer switches (a block is popped from the free list
in the cycle of the beat that needs it); ``refs`` leaves a two-entry FIFO one cycle after the
closing beat. Read side: one beat per cycle, including between replays and between buffers;
the memory's synchronous read is hidden by a one-stage pipeline in front of a two-entry output
FIFO, so a command accepted in cycle ``t`` offers its first beat on ``out`` in cycle ``t + 3``.
Every output's ``valid`` and payload come from registers (no path from ``ready``).

Parts
-----
:class:`PMU` (``pmu.py``) owns the memories and wires the parts, each a component of its own,
built from the checked parameters (:class:`~.params.PMUParams`, ``params.py``: also every size and
layout of the storage):

=========================================  ===================================================
part                                       job
=========================================  ===================================================
:class:`~.free_list.FreeList`              the free blocks (a FIFO of block numbers)
:class:`~.writer.Writer`                   the write side: entries, bounds, descriptors, ``refs``
:class:`~.write_decoder.WriteDecoder`      its first stage: each beat's part in its buffer,
                                           decided as the beat enters (the writer's queue)
:class:`~.controller.PlainController`,     a read side's commands: one per replay (from
:class:`~.controller.RefController`        ``buffers``, or ``ref`` and ``buffers``)
:class:`~.replay_engine.ReplayEngine`      a read side's replays: memory reads, affine walk,
                                           output FIFO, release requests, end-of-stream sweep
:class:`~.release.ReleaseArbiter`          the pending bits, the round-robin release arbiter and
                                           the walker that returns a buffer's blocks
:class:`~.data_ram.DataRAM`                the data memory: a write stage, reads in two cycles
                                           (``DP16KD`` with their output register on ECP5)
=========================================  ===================================================

The interfaces between the parts are in ``interfaces.py``.
"""

from .pmu import PMU
from .replay import Replay

__all__ = ["Replay", "PMU"]
