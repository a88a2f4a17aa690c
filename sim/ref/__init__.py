"""stepforge.sim.ref: the reference interpreter, the golden model the hardware must match.

:func:`~stepforge.sim.ref.interpreter.run` executes a program on token streams; each
``ops_*`` module registers the semantics of one family of operators.
"""

from .interpreter import run

__all__ = ["run"]
