"""EagerMerge as hardware: forward whole chunks from whichever input has one, name the source."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Select
from ..contract.beat import beat_signature, stop_above
from .mux import one_hot_mux
from .unit import ErrorCode, StatusSignature, check_int, raise_error

__all__ = ["EagerMergeUnit"]


class EagerMergeUnit(wiring.Component):
    """Forward each rank-``b`` chunk of whichever input offers one, without interleaving, and
    name its input on ``select`` (semantics section 4, EagerMerge; ``docs/routing.md``).

    Every input is a rank-``b`` stream; a chunk is everything up to and including its stop
    ``S_b`` (one element beat when ``b = 0``). Between chunks the unit grants the next input that
    offers a chunk beat, in **round-robin** order: the search starts just after the input that
    sent the previous chunk (at ``in0`` after reset), so an input that keeps its chunks coming
    cannot starve the others. The granted input keeps the grant until its chunk's last beat
    has moved. Its beats leave on ``data`` unchanged (``last`` cleared), and the first beat of
    every chunk is accompanied by one beat on ``select`` carrying the one-hot mask ``1 << i``
    (no stop). ``data`` and ``select`` are an eager fork: each takes the first beat when it is
    ready and the input beat is consumed once both have it, so neither ``valid`` waits on any
    ``ready``. Once a beat has been offered the grant is held, so an offered beat never changes.

    Timing: the grant is combinational (no register between an input and ``data``), so with no
    back-pressure ``data`` moves one beat per cycle with 0 extra cycles per chunk, also when the
    grant passes from one input to another. An input's ``Done`` (fused into its last beat, or
    a bare beat, which is consumed whenever it shows and its input does not hold the grant)
    retires it; when every input has ended, ``data`` and ``select`` each send a bare ``Done``
    beat (one cycle): the unit cannot know earlier that no input will send another chunk.
    Cost: ``data``'s payload is an ``n``-to-1 AND-OR multiplexer over the one-hot grant, about
    ``n - 1`` LUT4 per payload bit; the arbiter is a few ``n``-bit operations.

    The output order depends on timing; :func:`stepforge.sim.ref.eager.check_eager_merge` checks
    that the chunks ``select`` attributes to every input are that input's chunks, in order.

    Run-time faults (sticky ``status.error``; the unit stops moving beats), detected on the beat
    that shows them, before it is forwarded:

    ===========================  ==========================================================
    code                         when
    ===========================  ==========================================================
    ``EARLY_END``                an input ends (``Done``) inside a chunk
    ``BAD_STOP``                 an input stop above ``b`` (only when the field can hold one)
    ===========================  ==========================================================

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the inputs and of ``data``.
    n : int
        Number of inputs (``>= 1``).
    b : int
        Chunk rank and rank of every input (``>= 0``).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 .. in{n-1} : ``In(beat_signature(elem_type, b))``
        The chunk streams.
    data : ``Out(beat_signature(elem_type, b))``
        The merged chunks.
    select : ``Out(beat_signature(Select(n), 0))``
        One one-hot mask per chunk of ``data``, in the same order.
    status : ``Out(StatusSignature)``
        ``busy`` until both outputs have sent ``Done``; ``stall_in`` while no input offers a
        chunk beat (or the granted input offers none); ``stall_out`` while ``data`` or
        ``select`` offers a beat that is not taken; ``error``/``code`` as above.

    Raises
    ------
    ValueError
        ``n`` or ``b`` out of range.
    """

    def __init__(self, elem_type, n, b, *, row_bound=None):
        self.elem_type, self.n, self.b, self._row_bound = elem_type, n, b, row_bound
        check_int("EagerMergeUnit", "n", n, 1)
        check_int("EagerMergeUnit", "b", b, 0)
        members = {f"in{j}": In(beat_signature(elem_type, b, row_bound=row_bound))
                   for j in range(n)}
        members["data"] = Out(beat_signature(elem_type, b, row_bound=row_bound))
        members["select"] = Out(beat_signature(Select(n), 0))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        rb = f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return f"EagerMergeUnit({self.elem_type!r}, {self.n}, {self.b}{rb})"

    @property
    def inputs(self):
        """The input ports ``in0 .. in{n-1}`` in order."""
        return [getattr(self, f"in{j}") for j in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        n, b = self.n, self.b
        ins, do, so = self.inputs, self.data, self.select
        status = self.status

        err = Signal(name="err")
        m.d.comb += err.eq(status.error)

        # -- state ------------------------------------------------------------------------
        locked = Signal(name="locked")                # the grant is held (a beat was offered)
        owner = Signal(n, name="owner")               # the held grant, one-hot
        in_chunk = Signal(name="in_chunk")            # the owner's chunk has beats behind it
        prio = Signal(n, name="prio", init=1)         # round-robin: search starts here, one-hot
        data_sent = Signal(name="data_sent")          # data took the current beat
        sel_sent = Signal(name="sel_sent")            # select took the current chunk's mask
        in_done = Signal(n, name="in_done")           # inputs whose Done was taken
        end_data = Signal(name="end_data_sent")       # data's bare Done was taken
        end_sel = Signal(name="end_sel_sent")         # select's bare Done was taken

        # -- requests and the round-robin arbiter --------------------------------------------
        bare = Signal(n, name="bare")                 # inputs offering a bare Done beat
        req = Signal(n, name="req")                   # inputs offering a chunk beat
        for j, p in enumerate(ins):
            m.d.comb += [
                bare[j].eq(p.valid & ~p.payload.has_data & (p.payload.stop == 0) & p.payload.last),
                req[j].eq(p.valid & ~bare[j] & ~in_done[j]),
            ]
        below = Signal(n, name="below")               # inputs before the priority pointer
        high = Signal(n, name="high")                 # requests at or after the pointer
        pick = Signal(n, name="pick")
        m.d.comb += [
            below.eq(prio - 1),
            high.eq(req & ~below),
        ]
        with m.If(high.any()):
            m.d.comb += pick.eq(high & (~high + 1))
        with m.Else():
            m.d.comb += pick.eq(req & (~req + 1))
        grant = Signal(n, name="grant")
        m.d.comb += grant.eq(Mux(locked, owner, pick))

        # -- the granted input's beat (AND-OR multiplexer over the one-hot grant) -------------
        x = Signal(Value.cast(ins[0].payload).shape(), name="x_payload")
        m.d.comb += x.eq(one_hot_mux(grant, [p.payload.as_value() for p in ins]))
        x_view = do.payload.shape()(x)
        x_valid = Signal(name="x_valid")
        m.d.comb += x_valid.eq((grant & Cat(p.valid for p in ins)).any())
        ends = Signal(name="ends")
        m.d.comb += ends.eq(x_view.stop >= b if b > 0 else x_view.has_data)

        # -- faults ---------------------------------------------------------------------------
        bad_stop = Signal(name="bad_stop")
        f_early = Signal(name="f_early")
        in_bad = Signal(n, name="in_bad_stop")
        for j, p in enumerate(ins):
            m.d.comb += in_bad[j].eq(p.valid & stop_above(p.payload.stop, b))
        m.d.comb += [
            bad_stop.eq(in_bad.any()),
            f_early.eq(~bad_stop & x_valid & x_view.last & ~ends),
        ]
        raise_error(m, status, ErrorCode.BAD_STOP, bad_stop)
        raise_error(m, status, ErrorCode.EARLY_END, f_early)
        fault = Signal(name="fault")
        m.d.comb += fault.eq(bad_stop | f_early | err)

        # -- outputs: an eager fork of the granted beat ---------------------------------------
        go = Signal(name="go")
        first = Signal(name="first")                  # the beat opens a chunk: select gets a mask
        take = Signal(name="take")                    # the granted beat is consumed
        all_done = Signal(name="all_done")
        m.d.comb += [
            go.eq(x_valid & ~fault),
            first.eq(~in_chunk),
            all_done.eq(in_done.all() & ~locked),
        ]
        # The payloads come from the multiplexer and the grant, always: once every input has
        # ended nothing is granted, so data, has_data and stop are 0 for the bare Done beats
        # (stable, and no gating per bit).
        m.d.comb += [
            do.payload.data.eq(x_view.data),
            do.payload.has_data.eq(x_view.has_data),
            do.payload.stop.eq(x_view.stop),
            do.payload.last.eq(all_done),
            so.payload.data.eq(grant),
            so.payload.has_data.eq(~all_done),
            so.payload.last.eq(all_done),
        ]
        with m.If(all_done):
            m.d.comb += [
                do.valid.eq(~end_data & ~err),
                so.valid.eq(~end_sel & ~err),
            ]
        with m.Else():
            m.d.comb += [
                do.valid.eq(go & ~data_sent),
                so.valid.eq(go & first & ~sel_sent),
            ]
        m.d.comb += take.eq(go & ~all_done & (data_sent | do.ready)
                            & (~first | sel_sent | so.ready))
        for j, p in enumerate(ins):
            m.d.comb += p.ready.eq(~fault & ((grant[j] & take) | (bare[j] & ~grant[j])))
            with m.If(p.valid & p.ready & p.payload.last):
                m.d.sync += in_done[j].eq(1)

        with m.If(take):
            m.d.sync += [data_sent.eq(0), sel_sent.eq(0)]
            with m.If(ends):
                m.d.sync += [
                    locked.eq(0),
                    in_chunk.eq(0),
                    prio.eq(grant.rotate_left(1)),
                ]
            with m.Else():
                m.d.sync += [locked.eq(1), owner.eq(grant), in_chunk.eq(1)]
        with m.Elif(go & ~all_done):
            m.d.sync += [
                locked.eq(1),
                owner.eq(grant),
                data_sent.eq(data_sent | do.ready),
                sel_sent.eq(sel_sent | (so.valid & so.ready)),
            ]
        with m.If(all_done):
            m.d.sync += [
                end_data.eq(end_data | (do.valid & do.ready)),
                end_sel.eq(end_sel | (so.valid & so.ready)),
            ]

        # -- status -------------------------------------------------------------------------
        m.d.comb += [
            status.busy.eq(~err & ~(all_done & end_data & end_sel)
                           & (locked | Cat(p.valid for p in ins).any() | all_done)),
            status.stall_in.eq(~err & ~all_done & ~x_valid),
            status.stall_out.eq((do.valid & ~do.ready) | (so.valid & ~so.ready)),
        ]
        return m
