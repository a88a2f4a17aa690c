"""The replay side of a PMU read side: commands to memory reads to output beats."""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out

from ...contract.beat import beat_layout, beat_signature, stop_width
from ..fifo import StreamFIFO
from ..flags import below_after
from ..unit import ErrorCode, StatusSignature, raise_error
from ..walk import WalkIndex
from .interfaces import AsyncReadSignature, ReleaseSignature

__all__ = ["ReplayEngine"]


class ReplayEngine(wiring.Component):
    """Carries out the commands of read side ``i``: replays buffers from memory onto ``out``.

    Commands wait in a two-entry queue with registered outputs (a command taken from ``cmd``
    in cycle ``t`` starts in ``t + 1`` at the earliest; back-to-back commands still replay
    without a gap). A replay command reads the buffer's entries one per cycle (along its block
    chain, or in the read side's affine order) and closes the replay with the command's stop; a
    stop-only command sends one beat without data. The memories' synchronous read is one pipeline stage,
    the formed beat's register a second (the data memory's output register,
    :class:`~stepforge.hdl.pmu.data_ram.DataRAM`: no logic follows a block RAM's output in its
    cycle), in front of a four-entry output FIFO, entered only with room for the beat
    (``credit``, a counter's flag: a beat taken from ``out`` frees its place a cycle later). A command that releases its buffer raises a release request after its last
    read, held until the arbiter takes it; a new command for a buffer this read side no longer
    holds raises ``BAD_BUFFER``. With several read sides, once the controller has finished the
    engine sweeps its pending bits and releases every buffer it never received.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
    i : int
        The read side (``params.readers[i]``).

    Members
    -------
    cmd : ``In(stream.Signature(params.command_layout(i)))``
        Commands from the controller.
    out : ``Out(beat_signature(params.elem_type, out_rank))``
        The replayed stream.
    halt : ``In(1)``
        The PMU has raised an error: take no more commands.
    pending : ``In(params.blocks)``
        This read side's pending bits (the buffers it still holds, by first block).
    finished : ``In(1)``, with several read sides only
        The controller has finished: sweep the pending bits.
    rel : ``Out(ReleaseSignature(params))``
        Release requests to the arbiter.
    desc_rd : ``Out(AsyncReadSignature(...))``
        Asynchronous read of the descriptor table (at the command's buffer).
    data_rd : ``In(ReadPort.Signature(...))``
        Read of the data memory, its word two cycles after the address
        (:attr:`DataRAM.read_latency <stepforge.hdl.pmu.data_ram.DataRAM.read_latency>`).
    stop_rd : ``In(ReadPort.Signature(...))``
        Synchronous read of the stop memory (a cycle after the address).
    next_rd : ``Out(AsyncReadSignature(...))``, ``mode="dynamic"`` only
        Asynchronous read of the ``next`` table (the block after the current one).
    status : ``Out(StatusSignature)``
        ``busy`` while a command runs, a read is in flight, ``out`` holds a beat, a release
        waits or a sweep runs; ``stall_out`` while ``out`` is not taken. Error: ``BAD_BUFFER``.
    """

    def __init__(self, params, i):
        self.params, self.i = params, i
        pmu = params
        self.cfg = cfg = pmu.readers[i]
        self.out_rank = cfg.out_rank(pmu.rank, pmu.b)
        aw, idw = pmu.entry_addr_width, pmu.id_width
        members = {
            "cmd": In(stream.Signature(pmu.command_layout(i))),
            "out": Out(beat_signature(pmu.elem_type, self.out_rank, row_bound=pmu.row_bound)),
            "halt": In(1),
            "pending": In(pmu.blocks),
        }
        if len(pmu.readers) > 1:
            members["finished"] = In(1)
        members.update({
            "rel": Out(ReleaseSignature(pmu)),
            "desc_rd": Out(AsyncReadSignature(idw, pmu.desc_layout())),
            "data_rd": In(ReadPort.Signature(addr_width=aw, shape=pmu.entry_layout())),
            "stop_rd": In(ReadPort.Signature(addr_width=aw, shape=pmu.stop_shape())),
        })
        if pmu.mode == "dynamic":
            members["next_rd"] = Out(AsyncReadSignature(idw, unsigned(idw)))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"ReplayEngine({self.params!r}, {self.i})"

    def elaborate(self, platform):
        m = Module()
        pmu, cfg = self.params, self.cfg
        bsize = pmu.block_size
        # commands wait in a two-entry queue whose head and ``ready`` are registers: the
        # controller's decision (a FIFO head through its checks) ends there, not in this engine's
        # issue logic and the descriptor read (the worst iCE40 path, 34 ns over 14 cells)
        m.submodules.cmd_queue = cmdq = StreamFIFO(pmu.command_layout(self.i), 2, counters=False)
        wiring.connect(m, wiring.flipped(self.cmd), cmdq.i)
        cmd = cmdq.o
        c = cmd.payload
        pending, halt, out = self.pending, self.halt, self.out
        out_layout = beat_layout(pmu.elem_type, self.out_rank, row_bound=pmu.row_bound)
        lw = stop_width(self.out_rank)
        id_w = pmu.id_width

        act = Signal(name="active")
        e_replay = Signal(name="replay")
        e_id = Signal(id_w, name="id")
        e_blk = Signal(id_w, name="block")
        e_off = Signal(range(max(bsize, 2)), name="offset")
        n_walk = math.prod(cfg.order[0]) if cfg.order is not None else 0  # may exceed the buffer
        e_cnt = Signal(range(max(pmu.max_entries, n_walk) + 1), name="left")
        e_L = Signal(lw, name="stop")
        e_last = Signal(name="last")
        e_rel = Signal(name="release")
        rel_pend = Signal(name="rel_pend")
        # ``rel_block``: this command releases its buffer and a release still waits for the
        # arbiter (``e_rel & rel_pend``, a register set from both next values)
        rel_block = Signal(name="release_blocked")
        e_rel_n = Signal(name="release_next")
        rel_pend_n = Signal(name="rel_pend_next")
        m.d.comb += [e_rel_n.eq(e_rel), rel_pend_n.eq(rel_pend)]
        m.d.sync += [e_rel.eq(e_rel_n), rel_pend.eq(rel_pend_n),
                     rel_block.eq(e_rel_n & rel_pend_n)]
        rel_id = Signal(id_w, name="rel_id")
        rel_taken = self.rel.taken
        m.d.comb += [self.rel.valid.eq(rel_pend), self.rel.id.eq(rel_id)]

        # stage 1 reads the data memory, stage 2 holds the formed beat (the block RAM's output
        # ends in a register), the FIFO takes it. The credit is a function of a counter only:
        # a pop frees its place in the next cycle, so four places (issue to pop is three
        # cycles) keep one beat per cycle, and ``out.ready`` stays out of the issue logic
        m.submodules.out_fifo = ofifo = StreamFIFO(out_layout, 4, counters=False)
        wiring.connect(m, ofifo.o, wiring.flipped(out))
        pop = Signal(name="pop")
        m.d.comb += pop.eq(out.valid & out.ready)

        s1_v = Signal(name="s1_valid")
        s1_mem = Signal(name="s1_from_mem")
        s1_final = Signal(name="s1_final")
        s1_L = Signal(lw, name="s1_stop")
        s1_last = Signal(name="s1_last")
        s1_wstop = Signal(lw, name="s1_walk_stop")
        s2_v = Signal(name="s2_valid")

        final = Signal(name="final")        # e_cnt == 1, kept as a register beside the count
        credit = Signal(name="credit", init=1)
        rel_ok = Signal(name="release_ok")     # the release of the last read has a place
        issue = Signal(name="issue")
        # places taken in stage 1, stage 2 and the FIFO, counted (an issue takes one, a pop
        # frees one) rather than summed from the three. Not ``| pop``: the consumer's ``ready``
        # through the pop into the issue, the command queue and the read address was the worst
        # iCE40 path (28 ns over 9 cells)
        # ``credit`` (a place is free) is itself a register, set from the count's next value
        used = Signal(range(5), name="places_used")
        # (and not halted: ``halt`` is folded into the same register)
        m.d.sync += [used.eq(used + issue - pop),
                     credit.eq(below_after(used, 4, issue, pop) & ~halt)]
        bad_loaded = Signal(name="bad_loaded")  # a command loaded has failed its check (sticky)
        # ``active & ~bad_loaded``, one register (set from both next values), so that the issue
        # is an AND of four flip-flops, one LUT level (it enables the read address, the walk
        # and stage 1: five levels on the UP5K's GEMM through a two-level issue)
        act_good = Signal(name="active_good")
        m.d.comb += [
            # not ``| rel.taken``: the arbiter's decision stays out of the issue logic (a release
            # right behind another waits one more cycle)
            rel_ok.eq(~(final & rel_block)),
            # (``credit`` holds ``~halt``, ``act_good`` ``~bad_loaded``: a command found bad has
            # been loaded, below; it issues nothing)
            issue.eq(act_good & credit & rel_ok),
        ]

        # -- acceptance and its checks ---------------------------------------------------------
        cmd_fire = Signal(name="cmd_fire")
        m.d.comb += [self.desc_rd.addr.eq(c.id),
                     # (``credit`` holds ``~halt``; a command found bad is not waited for: it is
                     # never issued, and its error halts the PMU)
                     cmd.ready.eq(credit & (~act | (final & ~rel_block))),
                     cmd_fire.eq(cmd.valid & cmd.ready)]
        live = Signal(name="live")
        # a release issued this cycle or still waiting for the arbiter has ended the buffer
        m.d.comb += live.eq(pending.bit_select(c.id, 1)
                            & ~(rel_pend & (rel_id == c.id))
                            & ~(issue & final & e_rel & (e_id == c.id)))
        needs_live = Signal(name="needs_live")
        m.d.comb += needs_live.eq(c.replay | c.release)
        bad = Signal(name="bad_buffer")
        bad_terms = [needs_live & ~live]
        if cfg.order is not None:
            bad_terms.append(c.replay & ~self.desc_rd.data.full)
        m.d.comb += bad.eq(Cat(*bad_terms).any())
        # the check's outcome is registered and raises the error a cycle later (the buffer lookup
        # behind the command queue's pop was the worst iCE40 replay path, 8 LUTs deep); the
        # command it failed issues nothing meanwhile
        m.d.sync += [bad_loaded.eq(bad_loaded | (cmd_fire & bad)),
                     act_good.eq(Mux(cmd_fire, ~bad & ~bad_loaded,
                                     act_good & ~(issue & final)))]
        raise_error(m, self.status, ErrorCode.BAD_BUFFER, bad_loaded)

        rd_addr = Signal(range(max(pmu.blocks * bsize, 2)), name="read_addr")
        # the memories read every cycle: stage 1 uses the data only after an issue, and the
        # address moves only with one, so the issue logic stays off the block RAMs' enables
        m.d.comb += [self.data_rd.addr.eq(rd_addr), self.stop_rd.addr.eq(rd_addr),
                     self.data_rd.en.eq(1), self.stop_rd.en.eq(1)]
        walk_stop = self._address(m, e_id, e_blk, e_off, rd_addr, issue & e_replay, lw)

        # -- issue: one read (or the stop-only beat) per cycle --------------------------------
        with m.If(issue):
            m.d.sync += [s1_v.eq(1), s1_mem.eq(e_replay), s1_final.eq(final), s1_L.eq(e_L),
                         s1_last.eq(e_last), s1_wstop.eq(walk_stop), e_cnt.eq(e_cnt - 1),
                         final.eq(e_cnt == 2)]
            if bsize > 1:
                with m.If(e_off == bsize - 1):
                    m.d.sync += e_off.eq(0)
                with m.Else():
                    m.d.sync += e_off.eq(e_off + 1)
            if pmu.mode == "dynamic":
                with m.If(e_off == bsize - 1):
                    m.d.sync += e_blk.eq(self.next_rd.data)
            with m.If(final):
                m.d.sync += act.eq(0)
                with m.If(e_rel):
                    m.d.comb += rel_pend_n.eq(1)
                    m.d.sync += rel_id.eq(e_id)
        with m.Else():
            m.d.sync += s1_v.eq(0)
        with m.If(rel_taken & ~(issue & final & e_rel)):
            m.d.comb += rel_pend_n.eq(0)

        sweeping = Const(0)
        if len(pmu.readers) > 1:
            # At the end of its streams a read side releases every buffer it never received
            # (a routing operator sent it to another consumer), as the interpreter does.
            nblocks = pmu.blocks
            sw_ptr = Signal(range(nblocks + 1), name="sweep")
            sweeping = Signal(name="sweeping")
            sw_hit = Signal(name="sweep_hit")
            m.d.comb += [
                # (a command still in the queue holds its buffer)
                sweeping.eq(self.finished & ~cmd.valid & ~act & ~halt & (sw_ptr != nblocks)),
                sw_hit.eq(pending.bit_select(sw_ptr, 1) & ~(rel_pend & (rel_id == sw_ptr))),
            ]
            with m.If(sweeping):
                with m.If(~sw_hit):
                    m.d.sync += sw_ptr.eq(sw_ptr + 1)
                with m.Elif(~rel_pend | rel_taken):
                    m.d.comb += rel_pend_n.eq(1)
                    m.d.sync += [rel_id.eq(sw_ptr), sw_ptr.eq(sw_ptr + 1)]

        # a command is loaded without waiting for its check (the check's buffer lookup is not on
        # the path into the engine's registers): a bad one raises BAD_BUFFER two cycles later,
        # and ``bad_loaded``, then the error's halt, keep it from issuing anything
        with m.If(cmd_fire):
            if cfg.order is not None:
                n_entries = math.prod(cfg.order[0])
            else:
                n_entries = self.desc_rd.data.len
            m.d.sync += [act.eq(1), e_replay.eq(c.replay), e_id.eq(c.id), e_blk.eq(c.id),
                         e_off.eq(0), e_cnt.eq(Mux(c.replay, n_entries, 1)),
                         final.eq(~c.replay | (n_entries == 1)), e_L.eq(c.stop),
                         e_last.eq(c.last)]
            m.d.comb += e_rel_n.eq(c.release)

        # -- stage 1: the stop memory's word is here; the beat's stop and last ----------------
        s2_mem = Signal(name="s2_from_mem")
        s2_stop = Signal(lw, name="s2_stop")
        s2_last = Signal(name="s2_last")
        m.d.sync += [s2_v.eq(s1_v), s2_mem.eq(s1_mem), s2_last.eq(s1_last & s1_final)]
        with m.If(s1_final):
            m.d.sync += s2_stop.eq(s1_L)
        with m.Else():
            m.d.sync += s2_stop.eq(s1_wstop if cfg.order is not None else self.stop_rd.data)
        # -- stage 2: the data memory's word is here, out of its output register (inside the
        # block RAM on ECP5); the data field of a beat without data is ignored (semantics
        # section 2)
        s2_beat = Signal(out_layout, name="s2_beat")
        m.d.comb += [s2_beat.data.eq(Value.cast(self.data_rd.data.data)),
                     s2_beat.has_data.eq(s2_mem & self.data_rd.data.has_data),
                     s2_beat.stop.eq(s2_stop), s2_beat.last.eq(s2_last),
                     ofifo.i.payload.eq(s2_beat), ofifo.i.valid.eq(s2_v)]

        m.d.comb += [
            self.status.busy.eq(act | cmd.valid | s1_v | s2_v | out.valid | rel_pend | sweeping),
            self.status.stall_out.eq(out.valid & ~out.ready),
        ]
        return m

    def _address(self, m, e_id, e_blk, e_off, rd_addr, step, lw):
        """Drive ``rd_addr``: along the block chain, or the affine walk of the read side's order
        (advanced on ``step``, starting over after its last element). Returns the walk's stop
        (``S_k`` when the ``k`` innermost indices are at their last value; 0 without an
        order)."""
        bsize = self.params.block_size
        walk_stop = Signal(lw, name="walk_stop")
        if self.params.mode == "dynamic":
            m.d.comb += self.next_rd.addr.eq(e_blk)
        if self.cfg.order is None:
            m.d.comb += rd_addr.eq(e_blk * bsize + e_off)
            return walk_stop
        out_shape, stride, offset = self.cfg.order
        nd = len(out_shape)
        span = max(abs(offset), 1) + sum(abs((n - 1) * s) for n, s in zip(out_shape, stride))
        lin = Signal(range(-span - 1, span + 2), init=offset, name="walk_index")
        # Where the walk is, as registers (hdl.walk): which dimension counts at the next step
        # is one LUT of them, the stop (the inner dimensions at their last index; the outermost
        # is the replay's own end, not a stop of the walk) two. ``lin`` moves by the counting
        # dimension's ``delta``; ``step`` (the issue, the engine's deepest decision) only
        # chooses between the next values and the registers (through the flags' priority
        # chain into the indices it was the worst iCE40 GEMM path: 25 ns over 8 cells). A
        # replay command steps the walk through every element (``n_entries`` reads), and the
        # step at the last element starts it over (``lin`` back to ``offset``), so the next
        # command finds it at its start: no restart on the command's acceptance, whose logic
        # stays off the walk's enables (it was four to five LUT levels into them on the UP5K).
        ix = WalkIndex(out_shape)
        m.d.comb += [walk_stop.eq(ix.stop(first=1)), rd_addr.eq(e_id * bsize + lin)]
        delta = Signal.like(lin, name="walk_delta")
        with m.If(ix.final):
            m.d.comb += delta.eq(-sum((n - 1) * s for n, s in zip(out_shape, stride)))
        for d in range(nd):
            with m.If(ix.counts(d)):
                m.d.comb += delta.eq(stride[d] - sum((out_shape[e] - 1) * stride[e]
                                                     for e in range(d + 1, nd)))
        with m.If(step):
            m.d.sync += [lin.eq(lin + delta)] + ix.advance()
        return walk_stop
