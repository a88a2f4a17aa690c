"""The command side of a PMU read side: one command per replay, from its input streams."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contract.beat import beat_signature
from ..unit import ErrorCode, StatusSignature, raise_error

__all__ = ["PlainController", "RefController"]


class _Controller(wiring.Component):
    """Members, ``repr`` and parameters shared by the two controllers (see their docs)."""

    def __init__(self, params, i):
        self.params, self.i = params, i
        pmu = params
        self.cfg = cfg = pmu.readers[i]
        self.out_rank = cfg.out_rank(pmu.rank, pmu.b)
        members = {"buffers": In(beat_signature(pmu.buffer_type, pmu.rank - pmu.b))}
        if cfg.expand_rank is not None:
            members["ref"] = In(beat_signature(cfg.ref_type, pmu.rank - pmu.b,
                                               row_bound=pmu.row_bound))
        members.update({
            "cmd": Out(stream.Signature(pmu.command_layout(i))),
            "halt": In(1),
            "finished": Out(1),
            "status": Out(StatusSignature),
        })
        super().__init__(members)

    def __repr__(self):
        return f"{type(self).__name__}({self.params!r}, {self.i})"


class PlainController(_Controller):
    """Plain and static-repeat replay: the commands of read side ``i`` from ``buffers`` alone.

    A buffer element gives ``repeat`` replay commands (one without ``repeat``), every one but
    the last closing with ``S_depth``, the last with ``S_(depth + extra + s)`` (``extra`` 1 with
    ``repeat``), and only the last releasing the buffer; a stop-only beat gives one stop-only
    command; a bare ``Done`` one empty command with ``last``.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
    i : int
        The read side (``params.readers[i]``, without ``expand_rank``).

    Members
    -------
    buffers : ``In(beat_signature(params.buffer_type, params.rank - params.b))``
        Buffer ids, stops fused into the element beats.
    cmd : ``Out(stream.Signature(params.command_layout(i)))``
        Commands to the :class:`~stepforge.hdl.pmu.replay_engine.ReplayEngine`.
    halt : ``In(1)``
        The PMU has raised an error: send nothing more.
    finished : ``Out(1)``
        ``buffers`` has ended (its ``Done`` was taken).
    status : ``Out(StatusSignature)``
        ``stall_in`` while ``buffers`` has not ended and offers no beat. Error: ``BAD_STOP``.
    """

    def elaborate(self, platform):
        m = Module()
        bufs, cmd = self.buffers, self.cmd
        bp, c = bufs.payload, cmd.payload
        cfg, depth = self.cfg, self.cfg.depth(self.params.b)
        n = cfg.repeat if cfg.repeat is not None else 1
        extra = 1 if cfg.repeat is not None else 0
        rep = Signal(range(max(n, 2)), name="repeat")
        prev_nostop = Signal(name="buf_prev_nostop")
        ended = Signal(name="ended")
        is_el = Signal(name="is_buffer")
        # ``rep == n - 1``, kept as a register beside the count (the comparison was on the
        # worst iCE40 path of the read side, through ``buffers.ready`` into its FIFO's head)
        final_rep = Signal(name="final_replay", init=n == 1)
        split = Signal(name="split_stop")
        m.d.comb += [
            is_el.eq(bp.has_data),
            split.eq(~bp.has_data & (bp.stop != 0) & prev_nostop),
        ]
        raise_error(m, self.status, ErrorCode.BAD_STOP, bufs.valid & ~self.halt & split)
        # a split stop only raises the error (the PMU halts from the next cycle on): the beat
        # may still be sent as a command, so the stop comparison is not on the path from the
        # buffer FIFO's head through ``cmd.valid`` into its pop (the worst iCE40 read side path)
        m.d.comb += [
            cmd.valid.eq(bufs.valid & ~self.halt & ~ended),
            c.replay.eq(is_el),
            c.id.eq(bp.data),
            c.last.eq(bp.last & (final_rep | ~is_el)),
            c.release.eq(is_el & final_rep),
        ]
        with m.If(is_el):
            m.d.comb += c.stop.eq(Mux(final_rep, depth + extra + bp.stop, depth))
        with m.Elif(bp.stop != 0):
            m.d.comb += c.stop.eq(depth + extra + bp.stop)
        fire = Signal(name="cmd_fire")
        consume = Signal(name="consume")
        m.d.comb += [fire.eq(cmd.valid & cmd.ready), consume.eq(fire & (final_rep | ~is_el)),
                     bufs.ready.eq(consume)]
        with m.If(fire):
            with m.If(consume):
                m.d.sync += [rep.eq(0), final_rep.eq(n == 1),
                             prev_nostop.eq(is_el & (bp.stop == 0))]
                with m.If(bp.last):
                    m.d.sync += ended.eq(1)
            with m.Else():
                m.d.sync += [rep.eq(rep + 1), final_rep.eq(rep == n - 2 if n > 1 else 1)]
        m.d.comb += [self.finished.eq(ended), self.status.stall_in.eq(~ended & ~bufs.valid)]
        return m


class RefController(_Controller):
    """Reference-driven replay: one command of read side ``i`` per ``ref`` beat.

    The current buffer is taken from ``buffers`` with the first reference beat that needs one
    and kept until the reference shows a stop ``>= expand_rank``; that beat's command releases
    it (even after zero replays). Each reference element gives a replay command, each stop
    ``r`` closes with ``S_(depth + r)``. After the reference's ``Done`` the buffer stream must
    end with a bare ``Done``.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
    i : int
        The read side (``params.readers[i]``, with ``expand_rank``).

    Members
    -------
    buffers : ``In(beat_signature(params.buffer_type, params.rank - params.b))``
        Buffer ids, stops fused into the element beats.
    ref : ``In(beat_signature(ref_type, params.rank - params.b))``
        The reference stream (its data is ignored).
    cmd : ``Out(stream.Signature(params.command_layout(i)))``
        Commands to the :class:`~stepforge.hdl.pmu.replay_engine.ReplayEngine`.
    halt : ``In(1)``
        The PMU has raised an error: send nothing more.
    finished : ``Out(1)``
        Both ``ref`` and ``buffers`` have ended.
    status : ``Out(StatusSignature)``
        ``busy`` while a buffer is current or the buffer stream's ``Done`` is awaited;
        ``stall_in`` while the input the next step needs offers no beat. Errors: ``BAD_STOP``,
        ``REF_MISMATCH``.
    """

    def elaborate(self, platform):
        m = Module()
        bufs, refp, cmd = self.buffers, self.ref, self.cmd
        bp, rp, c = bufs.payload, refp.payload, cmd.payload
        halt = self.halt
        ce = self.cfg.expand_rank
        depth = self.cfg.depth(self.params.b)
        id_w = self.params.id_width
        cur_v = Signal(name="cur_valid")
        cur_id = Signal(id_w, name="cur_id")
        cur_t = Signal.like(bp.stop, name="cur_stop")
        buf_done = Signal(name="buffers_done")
        ended = Signal(name="ref_done")
        prev_ref_nostop = Signal(name="ref_prev_nostop")
        prev_buf_nostop = Signal(name="buf_prev_nostop")

        r = rp.stop
        e = rp.has_data
        ends = Signal(name="ends")
        take = Signal(name="take")
        eff_id = Signal(id_w, name="eff_id")
        eff_t = Signal.like(bp.stop, name="eff_stop")
        has_buf = Signal(name="has_buffer")
        cur_v_n = Signal(name="cur_valid_next")
        m.d.comb += [
            ends.eq(r >= ce),
            take.eq(~cur_v & (e | ends)),
            eff_id.eq(Mux(cur_v, cur_id, bp.data)),
            eff_t.eq(Mux(cur_v, cur_t, bp.stop)),
            has_buf.eq(cur_v | (take & bp.has_data)),
            cur_v_n.eq(has_buf & ~ends),
        ]
        go = Signal(name="go")
        m.d.comb += go.eq(refp.valid & ~halt & ~ended & (~take | bufs.valid | buf_done))
        mismatch = Signal(name="mismatch")
        m.d.comb += mismatch.eq((take & buf_done)
                                | (e & take & ~bp.has_data)
                                | (ends & (eff_t != r))
                                | (rp.last & cur_v_n))
        split = Signal(name="split_stop")
        m.d.comb += split.eq((~e & (r != 0) & prev_ref_nostop)
                             | (take & ~buf_done & ~bp.has_data & (bp.stop != 0) & prev_buf_nostop))
        raise_error(m, self.status, ErrorCode.BAD_STOP, go & split)
        raise_error(m, self.status, ErrorCode.REF_MISMATCH, go & ~split & mismatch)
        m.d.comb += [
            cmd.valid.eq(go & ~mismatch & ~split),
            c.replay.eq(e),
            c.id.eq(eff_id),
            c.last.eq(rp.last),
            c.release.eq(ends & has_buf),
        ]
        with m.If(e | (r != 0)):
            m.d.comb += c.stop.eq(depth + r)
        fire = Signal(name="cmd_fire")
        m.d.comb += [fire.eq(cmd.valid & cmd.ready), refp.ready.eq(fire),
                     bufs.ready.eq(fire & take)]
        with m.If(fire):
            m.d.sync += [cur_v.eq(cur_v_n), prev_ref_nostop.eq(e & (r == 0))]
            with m.If(take):
                m.d.sync += [cur_id.eq(bp.data), cur_t.eq(bp.stop),
                             prev_buf_nostop.eq(bp.has_data & (bp.stop == 0))]
                with m.If(bp.last):
                    m.d.sync += buf_done.eq(1)
            with m.If(rp.last):
                m.d.sync += ended.eq(1)

        # after the reference's Done the buffer stream must end too (a bare Done)
        tail = Signal(name="tail_check")
        m.d.comb += tail.eq(ended & ~buf_done & bufs.valid & ~halt)
        bare = Signal(name="bare_done")
        m.d.comb += bare.eq(~bp.has_data & (bp.stop == 0) & bp.last)
        raise_error(m, self.status, ErrorCode.REF_MISMATCH, tail & ~bare)
        with m.If(tail & bare):
            m.d.comb += bufs.ready.eq(1)
            m.d.sync += buf_done.eq(1)
        m.d.comb += [
            self.finished.eq(ended & buf_done),
            self.status.busy.eq(cur_v | (ended & ~buf_done)),  # ... until the buffers' Done
            self.status.stall_in.eq((~ended & ~refp.valid)
                                    | (refp.valid & take & ~bufs.valid & ~buf_done)
                                    | (ended & ~buf_done & ~bufs.valid)),
        ]
        return m
