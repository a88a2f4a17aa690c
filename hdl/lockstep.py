"""Lock-step inputs: several streams consumed token by token as one virtual beat."""

from amaranth.hdl import Cat, Mux, Signal

from .unit import ErrorCode, raise_error

__all__ = ["LockStep"]


class LockStep:
    """The virtual beat of one or more input ports consumed in lock step on tokens.

    Builds its logic into ``m`` when constructed. Each port keeps a cursor into its current beat
    (nothing taken yet / its element taken / element and stop taken, only ``Done`` left); a port
    is taken (``ready``) when a step uses up its beat.

    Parameters
    ----------
    m : amaranth.hdl.Module
    ports : sequence of (str, stream interface)
        The input ports (the unit's ``In`` stream members) and their names.
    status : StatusSignature interface
        Receives ``STOP_MISMATCH`` when the ports disagree on a token.

    Members
    -------
    valid : Signal
        Every port is valid and they agree: the virtual beat below is on offer.
    any_valid, all_valid : Signal
        Some / every port offers a beat (for the unit's status).
    elem : Signal
        The virtual beat carries an element (every port shows one).
    stop : Signal
        Its stop level (0: none).
    last : Signal
        It carries ``Done``.
    data : list of Value
        Each port's element (meaningful when ``elem``).
    take : Signal
        Driven by the user: the virtual beat is consumed this cycle (only while ``valid``).
    """

    def __init__(self, m, ports, status):
        names = [n for n, _ in ports]
        ps = [p for _, p in ports]
        first = ps[0].payload
        self.data = [p.payload.data for p in ps]
        self.valid = Signal(name="vb_valid")
        self.any_valid = Signal(name="vb_any_valid")
        self.all_valid = Signal(name="vb_all_valid")
        self.elem = Signal(name="vb_elem")
        self.stop = Signal.like(first.stop, name="vb_stop")
        self.last = Signal(name="vb_last")
        self.take = Signal(name="vb_take")
        m.d.comb += [
            self.all_valid.eq(Cat(*[p.valid for p in ps]).all()),
            self.any_valid.eq(Cat(*[p.valid for p in ps]).any()),
        ]
        if len(ps) == 1:
            m.d.comb += [
                self.valid.eq(ps[0].valid),
                self.elem.eq(first.has_data),
                self.stop.eq(first.stop),
                self.last.eq(first.last),
                ps[0].ready.eq(self.take),
            ]
            return

        # Tokens still to be used in each port's current beat.
        pos, e, s, d = [], [], [], []
        for name, p in zip(names, ps):
            pos_k = Signal(range(3), name=f"{name}_cursor")  # 0 none, 1 element, 2 element+stop
            e_k = Signal(name=f"{name}_has_elem")
            s_k = Signal(name=f"{name}_has_stop")
            m.d.comb += [
                e_k.eq(p.payload.has_data & (pos_k == 0)),
                s_k.eq((p.payload.stop != 0) & (pos_k != 2)),
            ]
            pos.append(pos_k)
            e.append(e_k)
            s.append(s_k)
            d.append(p.payload.last)
        take_e = Signal(name="vb_take_elem")
        take_s = Signal(name="vb_take_stop")
        take_d = Signal(name="vb_take_done")
        same_level = Cat(*[p.payload.stop == first.stop for p in ps[1:]]).all()
        mismatch = Signal(name="vb_mismatch")
        m.d.comb += [
            take_e.eq(Cat(*e).all()),
            take_s.eq(Cat(*s).all() & same_level),
            take_d.eq((take_s | ~Cat(*s).any()) & Cat(*d).all()),
            # After the element (taken, or absent on every port) a port's next token is its stop,
            # else its Done, else its next beat. An element against a non-element, two stop
            # levels, or a stop against Done is a disagreement; a port whose beat is used up
            # while another still shows a token simply waits for its next beat.
            mismatch.eq(self.all_valid & (
                (Cat(*e).any() & ~take_e)
                | (Cat(*s).all() & ~same_level)
                | (Cat(*s).any() & Cat(*[~s_k & d_k for s_k, d_k in zip(s, d)]).any()))),
            self.valid.eq(self.all_valid & ~mismatch),
            self.elem.eq(take_e),
            self.stop.eq(Mux(take_s, first.stop, 0)),
            self.last.eq(take_d),
        ]
        raise_error(m, status, ErrorCode.STOP_MISMATCH, mismatch)
        for k, p in enumerate(ps):
            left = (e[k] & ~take_e) | (s[k] & ~take_s) | (d[k] & ~take_d)
            m.d.comb += p.ready.eq(self.take & ~left)
            with m.If(self.take):
                with m.If(~left):
                    m.d.sync += pos[k].eq(0)
                with m.Elif(take_s):
                    m.d.sync += pos[k].eq(2)
                with m.Elif(take_e):
                    m.d.sync += pos[k].eq(1)
