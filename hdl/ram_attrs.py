"""Synthesis attributes of the block RAMs that the units infer (``amaranth.lib.memory``)."""

__all__ = ["NO_COLLISION"]

#: The attributes of a :class:`~amaranth.lib.memory.Memory` whose synchronous reads never use
#: the data of a read that hits the address written in the same cycle: Yosys's
#: ``no_rw_check``. Without it Yosys keeps the simulation's read-before-write result on a
#: collision by emulating it beside a block RAM that leaves it undefined (the iCE40's
#: ``SB_RAM40_4K``): the write data and a flag registered beside every block RAM and a
#: multiplexer per bit, 67 flip-flops for a PMU's 2,048 x 33 data memory (17 block RAMs) and 65
#: for a 4x4 load unit's tile buffer. Only for memories whose users wait out a collision:
#: a PMU replays a buffer only after it has been closed and reads a freed block only in the
#: cycle it releases it, a load unit reads a slot again when it was written in the cycle it was
#: read (``stale``), the host bridge's WRITE buffer is written while a frame arrives and read
#: after it, a block-RAM :class:`~stepforge.hdl.fifo.StreamFIFO` writes only a slot that
#: holds no beat. The simulation is unchanged (the attribute concerns synthesis alone).
NO_COLLISION = {"no_rw_check": 1}
