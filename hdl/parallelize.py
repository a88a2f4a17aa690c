"""Parallelize as hardware: deal rank-``b`` chunks round-robin over ``n`` outputs."""

from amaranth.hdl import Cat, Module, Mux, Signal

from ..contract.beat import stop_above
from .chunk_router import ChunkRouter
from .unit import ErrorCode, raise_error

__all__ = ["ParallelizeUnit"]


class ParallelizeUnit(ChunkRouter):
    """Deal the rank-``b`` chunks of ``in0`` round-robin over ``out0 .. out{n-1}`` (semantics
    section 4, Parallelize; ``docs/routing.md``).

    A chunk is everything up to and including the first beat whose stop is ``>= b`` (one
    element beat when ``b = 0``), counted over the whole stream (the dimensions above ``b``
    flattened): chunk ``j`` goes to ``out{j mod n}``. Stops below ``b`` pass through; the chunk's
    terminating stop leaves as ``S_b`` (no stop when ``b = 0``). At ``b = 0`` a stop-only beat
    carries no chunk and is consumed without output (the interpreter's flattened structure); at
    ``b >= 1`` a stop-only beat ``S_s`` with ``s >= b`` opening a chunk is an empty chunk and
    goes out as a stop-only ``S_b``.

    Timing: combinational, no register between ``in0`` and the outputs: one beat per cycle,
    0 extra cycles per chunk (the target output advances in the cycle the chunk's last beat
    moves). After ``in0``'s ``Done`` (fused, or a bare beat at a chunk boundary) every output
    sends a bare ``Done`` beat (one cycle, all outputs in parallel). ``in0``'s final beat stays
    on ``in0``, not consumed, until the last output has taken its ``Done``: it keeps the
    outputs' ``data`` field stable, so every output's ``data`` is wired straight to ``in0``'s
    (no multiplexer, no gating: the unit's logic does not grow with the element width).

    Run-time faults (sticky ``status.error``; the unit stops moving beats), detected on the beat
    that shows them, before it is forwarded:

    ===========================  ==========================================================
    code                         when
    ===========================  ==========================================================
    ``EARLY_END``                ``in0`` ends (``Done``) inside a chunk
    ``BAD_STOP``                 a stop above ``rank`` (only when the field can hold one)
    ===========================  ==========================================================

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the input stream (``>= 0``).
    n : int
        Number of outputs (``>= 1``).
    b : int
        Chunk rank, ``0 <= b <= rank``.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out0 .. out{n-1} : ``Out(beat_signature(elem_type, b))``
        The chunks dealt to each output, each closed by ``S_b``.
    status : ``Out(StatusSignature)``
        ``busy`` until every output has sent ``Done``; ``stall_in`` while ``in0`` offers
        nothing before its ``Done``; ``stall_out`` while an output offers a beat that is not
        taken; ``error``/``code`` as above.

    Raises
    ------
    ValueError
        ``rank``, ``n`` or ``b`` out of range.
    """

    def elaborate(self, platform):
        m = Module()
        n, b, rank = self.n, self.b, self.rank
        d = self.in0.payload
        outs = self.outputs
        status = self.status

        err = Signal(name="err")
        m.d.comb += err.eq(status.error)

        # -- state ------------------------------------------------------------------------
        target = Signal(n, name="target", init=1)     # the output of the current chunk, one-hot
        in_chunk = Signal(name="in_chunk")            # the current chunk has beats behind it
        done = Signal(name="done")                    # in0's head is its final beat, handled:
                                                      # held until every output took Done

        # -- the input beat ---------------------------------------------------------------
        bare = Signal(name="bare")
        ends = Signal(name="ends")                    # the beat terminates a chunk
        forward = Signal(name="forward")              # the beat goes to an output
        m.d.comb += [
            bare.eq(~d.has_data & (d.stop == 0) & d.last),
            ends.eq(d.stop >= b if b > 0 else d.has_data),
            forward.eq(~bare & (d.has_data if b == 0 else 1)),
        ]
        bad_stop = Signal(name="bad_stop")
        f_early = Signal(name="f_early")
        m.d.comb += [
            bad_stop.eq(self.in0.valid & ~done & stop_above(d.stop, rank)),
            f_early.eq(self.in0.valid & ~done & ~bad_stop & d.last & ~ends
                       & (~bare | in_chunk) if b > 0 else 0),
        ]
        raise_error(m, status, ErrorCode.BAD_STOP, bad_stop)
        raise_error(m, status, ErrorCode.EARLY_END, f_early)
        go = Signal(name="go")
        m.d.comb += go.eq(self.in0.valid & ~done & ~bad_stop & ~f_early & ~err)

        # the outputs: in0's data field, S_b closing the chunk, then a bare Done each
        end_fire, done_sent = self.drive_outputs(m, ends=ends, offer=Mux(go & forward, target, 0),
                                                 ending=done, err=err)
        fire = Signal(name="fire")                    # the beat is handled (forwarded or dropped)
        m.d.comb += [
            fire.eq(go & (~forward | (target & Cat(o.ready for o in outs)).any())),
            self.in0.ready.eq((fire & ~d.last) | end_fire),
        ]
        with m.If(fire):
            with m.If(forward & ends):
                m.d.sync += [target.eq(target.rotate_left(1)), in_chunk.eq(0)]
            with m.Elif(forward):
                m.d.sync += in_chunk.eq(1)
            with m.If(d.last):
                m.d.sync += done.eq(1)

        # -- status -------------------------------------------------------------------------
        m.d.comb += [
            status.busy.eq(~err & ~done_sent.all() & (self.in0.valid | in_chunk | done)),
            status.stall_in.eq(~err & ~done & ~self.in0.valid),
            status.stall_out.eq(Cat(o.valid & ~o.ready for o in outs).any()),
        ]
        return m
