"""A one-beat look-ahead register in front of an input port."""

from amaranth.hdl import Signal

__all__ = ["HeldBeat"]


class HeldBeat:
    """The beat a unit works on, held in a register while the unit looks at the one after it.

    Units that rewrite stops (Promote, RepeatStatic, Reshape) decide some output beats from the
    beat that *follows* the current one: a stop-only beat right after an element is fused into
    the element's output. They take the current beat into a register and look at the port for the
    next. Builds its logic into ``m`` when constructed; the unit drives the register through
    :meth:`update`.

    Parameters
    ----------
    m : amaranth.hdl.Module
    port : stream interface
        The unit's ``In`` stream member.

    Members
    -------
    held : Signal(port.payload.shape())
        The register.
    held_valid : Signal
        The register holds the current beat.
    cur : Signal(port.payload.shape())
        The current beat: the register's while ``held_valid``, else the port's.
    cur_valid : Signal
        ``cur`` is a beat (always while ``held_valid``, else the port's ``valid``).
    next : View
        The port's payload: the beat after ``cur`` while ``held_valid``.
    """

    def __init__(self, m, port):
        layout = port.payload.shape()
        self._port = port
        self.held = Signal(layout, name="held")
        self.held_valid = Signal(name="held_valid")
        self.cur = Signal(layout, name="cur")
        self.cur_valid = Signal(name="cur_valid")
        self.next = port.payload
        with m.If(self.held_valid):
            m.d.comb += [self.cur.eq(self.held), self.cur_valid.eq(1)]
        with m.Else():
            m.d.comb += [self.cur.eq(port.payload), self.cur_valid.eq(port.valid)]

    def update(self, m, load, release):
        """Take the port's beat into the register when ``load``; else empty it when ``release``."""
        with m.If(load):
            m.d.sync += [self.held.eq(self._port.payload), self.held_valid.eq(1)]
        with m.Elif(release):
            m.d.sync += self.held_valid.eq(0)
