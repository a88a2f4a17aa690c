"""The performance model, FIFO sizing, the static deadlock check and parameter sweeps (issue 11).

* :func:`predict` (:mod:`~stepforge.perf.model`): the cycles, unit utilization and FIFO
  high-water marks of a compiled program, from the interpreter's token streams, without RTL.
"""

from .model import Deadlock, PerfResult, needs_run, predict, predict_program

__all__ = ["Deadlock", "PerfResult", "needs_run", "predict", "predict_program"]
