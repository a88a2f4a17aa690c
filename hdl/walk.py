"""The position of a static row-major walk, with every decision of a step in registers."""

from amaranth.hdl import C, Cat, Mux, Signal

from .flags import thermometer_count

__all__ = ["WalkIndex"]


class WalkIndex:
    """Where a row-major walk over a static ``shape`` is, as flags that are registers.

    A walk visits ``shape``'s indices in row-major order, one per step: the innermost dimension
    counts up; a dimension at its last index wraps to 0 and the next outer one counts. What a
    step does depends only on which dimensions are at their last index, and only through
    ``trail[d]``: every dimension from ``d`` inwards is at its last index (``trail[0]``: the
    walk is at its last element, :attr:`final`). Dimension ``d`` counts at the next step when
    ``trail[d + 1] & ~trail[d]`` and wraps when ``trail[d]``; the stop of the element (how many
    inner dimensions are at their last index) is the number of trails set.

    Every dimension has its index, ``at_last`` (the index is its last) and ``penult`` (one
    before it), and every trail is a register of its own: the next element ends the
    dimensions from ``d`` inwards exactly when this one is the one before their end, which is
    ``penult`` of the innermost of them that counts (an extent above 1) and ``at_last`` of the
    others, an AND of registers. No trail waits on another: a step's choice is one LUT of
    registers and every next value a few LUTs of them (as ANDs of the inner dimensions'
    flags the trails were a chain of LUTs in front of every index, address and stop: the worst
    iCE40 load and PMU replay paths, four to five LUT levels).

    A step at the last element starts the walk over.

    Parameters
    ----------
    shape : sequence of int
        The walk's extent per dimension, outermost first (each ``>= 1``).
    prefix : str
        Signal name prefix (``f"{prefix}_idx{d}"``, ``_at_last``, ``_penult``, ``_trail``).

    Attributes
    ----------
    trail : list of Value
        ``len(shape) + 1`` flags, outermost first (the last a constant 1; a trail over
        dimensions of extent 1 only is a constant 1 too).
    final : Value
        The walk is at its last element (a register, or a constant 1).

    Raises
    ------
    ValueError
        An extent is below 1.
    """

    def __init__(self, shape, *, prefix="walk"):
        shape = tuple(int(n) for n in shape)
        if any(n < 1 for n in shape):
            raise ValueError(f"WalkIndex shape must have extents >= 1, not {shape!r}")
        self.shape = shape
        self.prefix = prefix
        D = len(shape)
        self._idx = [Signal(range(n), name=f"{prefix}_idx{d}") if n > 1 else None
                     for d, n in enumerate(shape)]
        self._last = [Signal(name=f"{prefix}_at_last{d}") if n > 1 else C(1, 1)
                      for d, n in enumerate(shape)]
        self._penult = [Signal(name=f"{prefix}_penult{d}", init=n == 2) if n > 1 else None
                        for d, n in enumerate(shape)]
        self.trail = [Signal(name=f"{prefix}_trail{d}") if any(n > 1 for n in shape[d:])
                      else C(1, 1) for d in range(D)] + [C(1, 1)]
        self.final = self.trail[0]

    def __repr__(self):
        return f"WalkIndex({self.shape!r}, prefix={self.prefix!r})"

    def counts(self, d):
        """Dimension ``d`` counts up at the next step (every inner one wraps)."""
        return self.trail[d + 1] & ~self.trail[d]

    def stop(self, first=0):
        """How many of the dimensions ``first ..`` are at their last index, as a value (the
        trails from the innermost out are a thermometer code: LUTs of their registers)."""
        return thermometer_count([self.trail[d] for d in reversed(range(first, len(self.shape)))])

    def advance(self):
        """Statements (under the caller's step) that move the walk to its next element."""
        shape, t = self.shape, self.trail
        stmts = []
        for d, n in enumerate(shape):
            if n == 1:
                continue
            idx, last, pen = self._idx[d], self._last[d], self._penult[d]
            # wrap when every dimension from d inwards is at its end, count when every inner
            # one is, else hold
            stmts += [idx.eq(Mux(t[d], 0, Mux(t[d + 1], idx + 1, idx))),
                      last.eq(Mux(t[d], 0, Mux(t[d + 1], pen, last))),
                      pen.eq(Mux(t[d], n == 2, Mux(t[d + 1], idx == n - 3, pen)))]
        for d in range(len(shape)):
            if isinstance(t[d], Signal):
                # the innermost dimension from d on that counts ends last
                j = max(e for e in range(d, len(shape)) if shape[e] > 1)
                before_end = Cat(self._penult[j], *(self._last[e] for e in range(d, len(shape))
                                                   if e != j)).all()
                stmts.append(t[d].eq(~t[d] & before_end))
        return stmts
