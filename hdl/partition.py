"""Partition as hardware: route each rank-``b`` chunk to the outputs its selector element names."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib.wiring import In

from ..compiler.types import Select
from ..contract.beat import beat_signature, stop_above
from .chunk_router import ChunkRouter
from .unit import ErrorCode, raise_error

__all__ = ["PartitionUnit"]


class PartitionUnit(ChunkRouter):
    """Forward each rank-``b`` chunk of ``in0`` to every output its selector element names
    (semantics section 4, Partition; ``docs/routing.md``).

    A *chunk* is everything up to and including the first beat whose stop is ``>= b`` (one
    element beat when ``b = 0``). For every selector element (a mask of ``n`` bits, bit ``i`` =
    ``out{i}``) the unit forwards the next chunk to every output whose bit is set (multi-hot is
    a broadcast): stops below ``b`` pass through unchanged, the chunk's terminating stop leaves
    as ``S_b`` (no stop when ``b = 0``). A zero mask drops its chunk (the interpreter's default
    ``drop=True``); the selector element that names no output accounts for it. A stop-only
    selector beat ``S_k`` (an empty selector fibre) consumes the stop-only data beat ``S_(k+b)``
    and routes nothing.

    Timing. The current selector element sits in a register; it is replaced in the same cycle
    as the last beat of its chunk moves, so chunks follow each other with no gap: one data beat
    per cycle, 0 extra cycles per chunk (the first selector element costs one cycle of
    latency). A data beat goes to its outputs as an *eager fork*: each selected output is
    offered the beat until it takes it (one ``sent`` bit per output), and the data beat is
    consumed once every selected output has it. Outputs therefore never wait for each other
    within a cycle, no ``valid`` depends on any ``ready``, and with no back-pressure a multi-hot
    chunk reaches all its outputs in the same cycles. After the selector and the data have both
    ended, every output receives a bare ``Done`` beat (``has_data = 0, stop = 0, last = 1``,
    one cycle, all outputs in parallel): an output cannot know earlier that no more chunks come.
    ``in0``'s final beat (the one with ``last``, or its bare ``Done``) stays on ``in0``, not
    consumed, until the last output has taken its ``Done``: it keeps the outputs' ``data``
    field stable, so every output's ``data`` is wired straight to ``in0``'s (no multiplexer, no
    gating: the unit's logic does not grow with the element width).

    ``Done`` on an input may be fused into its last beat or arrive as a bare beat; both are
    accepted.

    Run-time faults (sticky ``status.error``; the unit stops moving beats). Each is detected on
    the beat that shows it, before that beat is forwarded, so nothing wrong leaves the unit:

    ===========================  ==========================================================
    code                         when
    ===========================  ==========================================================
    ``SELECT_MISMATCH``          a selector element with stop ``S_k`` meets a chunk that ends
                                 with a stop other than ``S_(k+b)``; a mask meets a stop-only
                                 beat at ``b = 0``; a stop-only selector ``S_k`` meets anything
                                 but a stop-only data beat ``S_(k+b)`` (detected on the first
                                 data beat, where the interpreter first reads the chunk)
    ``EARLY_END``                the data ends (``Done``) while the selector still has an
                                 element, or inside a chunk
    ``LEFTOVER``                 the selector has ended and the data offers another beat
                                 than a bare ``Done``
    ``BAD_STOP``                 a data stop above ``rank`` or a selector stop above
                                 ``rank - b`` (only when the stop field can hold one)
    ===========================  ==========================================================

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the data.
    rank : int
        Rank ``a`` of the data stream (``>= 0``).
    n : int
        Number of outputs (``>= 1``).
    b : int
        Chunk rank, ``0 <= b <= rank``.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        The data beats.
    select : ``In(beat_signature(Select(n), rank - b))``
        One mask per chunk.
    out0 .. out{n-1} : ``Out(beat_signature(elem_type, b))``
        The chunks routed to each output, each closed by ``S_b``.
    status : ``Out(StatusSignature)``
        ``busy`` until every output has sent ``Done``; ``stall_in`` while the beat the unit
        needs next (selector or data) is not offered; ``stall_out`` while an output offers a
        beat that is not taken; ``error``/``code`` as in the table above.

    Raises
    ------
    ValueError
        ``rank``, ``n`` or ``b`` out of range.
    """

    def extra_inputs(self):
        return {"select": In(beat_signature(Select(self.n), self.rank - self.b))}

    def elaborate(self, platform):
        m = Module()
        n, b, rank = self.n, self.b, self.rank
        d, s = self.in0.payload, self.select.payload
        outs = self.outputs
        status = self.status

        err = Signal(name="err")
        m.d.comb += err.eq(status.error)

        # -- state ------------------------------------------------------------------------
        cur_valid = Signal(name="cur_valid")          # a selector element is held
        cur_elem = Signal(name="cur_elem")            # it is a mask (else a stop-only S_k)
        cur_mask = Signal(n, name="cur_mask")
        cur_k = Signal.like(s.stop, name="cur_k")
        sel_done = Signal(name="sel_done")            # the selector's Done was taken
        data_end = Signal(name="data_end")            # in0's head is its final beat, handled:
                                                      # held until every output took Done
        sent = Signal(n, name="sent")                 # outputs that took the current data beat

        # -- the data beat ------------------------------------------------------------------
        bare = Signal(name="bare")                    # a bare Done beat
        ends = Signal(name="ends")                    # the beat terminates a chunk
        want = Signal(range(rank + 2), name="want")   # the stop the chunk must end with
        m.d.comb += [
            bare.eq(~d.has_data & (d.stop == 0) & d.last),
            ends.eq(d.stop >= b if b > 0 else d.has_data),
            want.eq(cur_k + b),
        ]

        phase_chunk = Signal(name="phase_chunk")      # moving the chunk of the held element
        phase_tail = Signal(name="phase_tail")        # selector ended, waiting for the data's Done
        phase_end = Signal(name="phase_end")          # both ended: send Done on every output
        m.d.comb += [
            phase_chunk.eq(cur_valid & ~data_end),
            phase_tail.eq(sel_done & ~cur_valid & ~data_end),
            phase_end.eq(sel_done & ~cur_valid & data_end),
        ]

        # -- faults (mutually exclusive, in priority order) ----------------------------------
        bad_stop = Signal(name="bad_stop")
        f_early = Signal(name="f_early")
        f_mismatch = Signal(name="f_mismatch")
        f_leftover = Signal(name="f_leftover")
        f_no_data = Signal(name="f_no_data")          # an element is held but the data has ended
        f_sel_stop = Signal(name="f_sel_stop")
        early = Signal(name="early")
        mismatch = Signal(name="mismatch")
        if b > 0:
            m.d.comb += early.eq(d.last & ~ends)      # Done inside a chunk (a bare Done included)
            with m.If(cur_elem):
                m.d.comb += mismatch.eq(ends & (d.stop != want))
            with m.Else():
                m.d.comb += mismatch.eq(~(~d.has_data & (d.stop == want)))
        else:
            m.d.comb += early.eq(bare)
            with m.If(cur_elem):
                m.d.comb += mismatch.eq(~d.has_data | (d.stop != cur_k))
            with m.Else():
                m.d.comb += mismatch.eq(d.has_data | (d.stop != cur_k))
        fault = Signal(name="fault")
        m.d.comb += [
            bad_stop.eq(self.in0.valid & (phase_chunk | phase_tail) & stop_above(d.stop, rank)),
            f_early.eq(self.in0.valid & phase_chunk & ~bad_stop & early),
            f_mismatch.eq(self.in0.valid & phase_chunk & ~bad_stop & ~early & mismatch),
            f_leftover.eq(self.in0.valid & phase_tail & ~bad_stop & ~bare),
            f_no_data.eq(cur_valid & data_end),
            fault.eq(bad_stop | f_early | f_mismatch | f_leftover),
        ]

        # -- forwarding (eager fork) --------------------------------------------------------
        go = Signal(name="go")                        # the data beat may move now
        route = Signal(n, name="route")               # outputs that get the data beat
        taken = Signal(n, name="taken")               # outputs done with the data beat
        d_fire = Signal(name="d_fire")
        m.d.comb += [
            go.eq(self.in0.valid & phase_chunk & ~fault & ~err),
            route.eq(Cat(cur_mask[i] & cur_elem for i in range(n))),
        ]
        # the outputs: in0's data field, S_b closing the chunk, then a bare Done each
        end_fire, done_sent = self.drive_outputs(m, ends=ends, offer=Mux(go, route & ~sent, 0),
                                                 ending=phase_end, err=err)
        m.d.comb += [taken[i].eq(~route[i] | sent[i] | o.ready) for i, o in enumerate(outs)]
        m.d.comb += [
            d_fire.eq(go & taken.all()),
            self.in0.ready.eq((d_fire & ~d.last) | end_fire),
        ]
        with m.If((d_fire & d.last) | (phase_tail & self.in0.valid & bare & ~fault & ~err)):
            m.d.sync += data_end.eq(1)
        with m.If(d_fire):
            m.d.sync += sent.eq(0)
        with m.Else():
            m.d.sync += sent.eq(sent | Cat(o.valid & o.ready for o in outs))

        # -- selector: the next element loads as the last beat of the chunk moves -----------
        advance = Signal(name="advance")
        m.d.comb += [
            advance.eq(d_fire & (ends | ~cur_elem)),
            self.select.ready.eq((~cur_valid | advance) & ~sel_done & ~err),
            f_sel_stop.eq(self.select.valid & self.select.ready & stop_above(s.stop, rank - b)),
        ]
        with m.If(self.select.valid & self.select.ready):
            m.d.sync += [
                cur_valid.eq(s.has_data | (s.stop != 0)),
                cur_elem.eq(s.has_data),
                cur_mask.eq(s.data),
                cur_k.eq(s.stop),
                sel_done.eq(s.last),
            ]
        with m.Elif(advance):
            m.d.sync += cur_valid.eq(0)

        raise_error(m, status, ErrorCode.BAD_STOP, bad_stop | f_sel_stop)
        raise_error(m, status, ErrorCode.EARLY_END, f_early | f_no_data)
        raise_error(m, status, ErrorCode.SELECT_MISMATCH, f_mismatch)
        raise_error(m, status, ErrorCode.LEFTOVER, f_leftover)

        # -- status -------------------------------------------------------------------------
        finished = Signal(name="finished")
        m.d.comb += [
            finished.eq(phase_end & done_sent.all()),
            status.busy.eq(~err & ~finished & (cur_valid | sel_done | self.in0.valid
                                                | self.select.valid)),
            status.stall_in.eq(~err & (((phase_chunk | phase_tail) & ~self.in0.valid)
                                       | (~cur_valid & ~sel_done & ~self.select.valid))),
            status.stall_out.eq(Cat(o.valid & ~o.ready for o in outs).any()),
        ]
        return m
