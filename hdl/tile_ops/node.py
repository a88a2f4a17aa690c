"""What the node circuits share (:class:`_Node`): the output register, its next value, the step
window and the stage that writes it."""

from .tile import HTile

__all__ = []


class _Node:
    """What the node circuits share: the output register, its next value and the step window.

    A node is *active* in steps ``start .. start + steps - 1``. ``nxt`` is the register's value
    after the step being written (the register where the node writes nothing this step); the
    node clocks ``reg <= nxt`` when a step of a data beat is written and the pipeline moves.
    Consumers that run later read ``reg``; the last node of a sequence is read through ``nxt``
    in its final step.

    A node with ``latency`` ``d > 0`` writes a step ``d`` pipeline moves after issuing it: it
    reads its operands at the issue and registers them (and partial results) on the way.
    :attr:`depth` is the latency the node has when pipelined (0: never pipelined); the PCU
    chooses each node's ``latency`` (0 or ``depth``).
    """

    early_inputs = False
    steps = 1
    dynamic = False
    depth = 0
    latency = 0

    def steps_for(self, rows):
        """Steps needed when only the first ``rows`` rows are valid (at least 1); ``steps`` for
        a node whose rows are static."""
        if not self.dynamic:
            return self.steps
        return max(1, min(self.steps, self._row_steps(rows)))

    def _alloc(self, dtype, rows, cols, name, keep_reg=True, reg=None):
        if reg is not None:
            self.reg = reg
        else:
            self.reg = HTile.signals(dtype, rows, cols, f"{name}_r") if keep_reg else None
        self.nxt = HTile.signals(dtype, rows, cols, f"{name}_n")

    def _default(self, m):
        """``nxt = reg`` unless a step writes it (later statements override)."""
        if self.reg is not None:
            m.d.comb += [n.eq(r) for n, r in zip(self.nxt.flat(), self.reg.flat())]

    def _write(self, m, at, *, data_only=True):
        """``reg <= nxt`` in the node's steps of data beats (``data_only``; else of every beat),
        at the write stage ``at`` (an :class:`Issue`)."""
        if self.reg is None:
            return
        active = at.active(range(self.start, self.start + self.steps))
        if data_only:
            active = active & at.data
        with m.If(active):
            m.d.sync += [r.eq(n) for r, n in zip(self.reg.flat(), self.nxt.flat())]

    def _write_stage(self, m, issue):
        return issue.later(m, self.latency, self.name) if self.latency else issue
