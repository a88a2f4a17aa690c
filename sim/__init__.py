"""stepforge.sim: running a program.

Two subpackages that do not import each other:

- :mod:`stepforge.sim.ref`, the golden interpreter: every operator's meaning on token streams;
- :mod:`stepforge.sim.rtl`, the RTL harness: Verilator builds, test benches, the cocotb job
  format and the decoding of what the hardware returns.
"""
