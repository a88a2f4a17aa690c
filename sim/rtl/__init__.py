"""stepforge.sim.rtl: the RTL harness, compiled programs run cycle-accurately.

:func:`run_rtl` and :func:`compile_program` (module :mod:`~stepforge.sim.rtl.run`) take a program
through Verilog and Verilator; :mod:`~stepforge.sim.rtl.verilator` builds and caches,
:mod:`~stepforge.sim.rtl.separate` compiles each unit once, :mod:`~stepforge.sim.rtl.system_sim`
runs a system in Amaranth's simulator, and :mod:`~stepforge.sim.rtl.testbench` drives single units.
"""

from .run import (RTLResult, compile_program, deadlock_report, error_report, run_rtl,
                  tensor_regions, tensor_span, tensor_words)

__all__ = ["RTLResult", "compile_program", "deadlock_report", "error_report", "run_rtl",
           "tensor_regions", "tensor_span", "tensor_words"]
