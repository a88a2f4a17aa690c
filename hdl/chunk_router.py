"""What Parallelize and Partition share: rank-``b`` chunks of ``in0`` fanned out to ``n`` outputs."""

from amaranth.hdl import Cat, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .unit import StatusSignature, check_int

__all__ = ["ChunkRouter"]


class ChunkRouter(wiring.Component):
    """Base of the units that send each rank-``b`` chunk of ``in0`` to some of ``n`` outputs.

    Owns the members every such router has (``in0``, ``out0 .. out{n-1}``, ``status``, plus
    the subclass's :meth:`extra_inputs`), the constructor checks and the ``repr``, and builds
    the outputs' side (:meth:`drive_outputs`): every output's ``data`` is wired straight to
    ``in0``'s, a chunk's terminating stop leaves as ``S_b``, and after ``in0``'s final beat every
    output takes one bare ``Done`` while ``in0`` keeps that beat (so the data field stays stable
    without a multiplexer or a register).

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
    """

    def __init__(self, elem_type, rank, n, b, *, row_bound=None):
        unit = type(self).__name__
        check_int(unit, "rank", rank, 0)
        check_int(unit, "n", n, 1)
        check_int(unit, "b", b, 0, rank)
        self.elem_type, self.rank, self.n, self.b = elem_type, rank, n, b
        self._row_bound = row_bound
        members = {"in0": In(beat_signature(elem_type, rank, row_bound=row_bound))}
        members.update(self.extra_inputs())
        for i in range(n):
            members[f"out{i}"] = Out(beat_signature(elem_type, b, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def extra_inputs(self):
        """The subclass's further ``In`` members (after ``in0``), built once the parameters are
        checked: none here."""
        return {}

    def __repr__(self):
        rb = f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return f"{type(self).__name__}({self.elem_type!r}, {self.rank}, {self.n}, {self.b}{rb})"

    @property
    def outputs(self):
        """The output ports ``out0 .. out{n-1}`` in order."""
        return [getattr(self, f"out{i}") for i in range(self.n)]

    def drive_outputs(self, m, *, ends, offer, ending, err):
        """Drive every output from ``in0``; return ``(end_fire, done_sent)``.

        Parameters
        ----------
        ends : Value
            ``in0``'s beat terminates a chunk (its stop leaves as ``S_b``; other stops pass).
        offer : Value
            ``n`` bits: the outputs offered ``in0``'s beat this cycle.
        ending : Value
            ``in0``'s final beat is handled and held: every output is offered a bare ``Done``.
        err : Value
            The unit's sticky error: nothing more is offered.

        Returns
        -------
        end_fire : Signal
            The last outputs take their ``Done`` this cycle: ``in0``'s final beat retires.
        done_sent : Signal(n)
            The outputs that took their ``Done``.
        """
        d, outs = self.in0.payload, self.outputs
        out_stop = Signal(Value.cast(outs[0].payload.stop).shape(), name="out_stop")
        if self.b > 0:
            m.d.comb += out_stop.eq(Mux(ends, self.b, d.stop))
        done_sent = Signal(self.n, name="done_sent")
        for i, o in enumerate(outs):
            m.d.comb += [
                o.valid.eq(Mux(ending, ~done_sent[i] & ~err, offer[i])),
                o.payload.data.eq(d.data),
                o.payload.has_data.eq(d.has_data & ~ending),
                o.payload.stop.eq(Mux(ending, 0, out_stop)),
                o.payload.last.eq(ending),
            ]
        end_fire = Signal(name="end_fire")
        m.d.comb += end_fire.eq(ending & ~done_sent.all()
                                & (done_sent | Cat(o.ready for o in outs)).all() & ~err)
        m.d.sync += done_sent.eq(done_sent | Cat(o.valid & o.ready & ending for o in outs))
        return end_fire, done_sent
