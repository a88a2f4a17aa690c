"""The PCU's datapath pieces: tile values, per-element ALUs and the time-multiplexed node circuits.

A tile function (:class:`~stepforge.compiler.functions.TileFunction`) becomes one circuit per
primitive node of its expression graph (:class:`~stepforge.hdl.pcu.PCU` schedules them). Each
node owns an output register of its tile and computes it over a fixed number of *steps* (clock
cycles), reusing a few arithmetic units:

====================================  ===============================  ===========================
node                                  units                            steps
====================================  ===============================  ===========================
elementwise (add sub mul div maximum  ``lanes`` ALUs                   ``ceil(elements / lanes)``
exp silu rsqrt cast)
``row_sum`` ``row_max`` ``[R, C]``    ``lanes`` ALUs, one row each     ``ceil(R / lanes) * C``
``matmul`` ``mac`` ``[M,K] @ [K,N]``  ``multipliers`` multipliers      ``ceil(M*K*N / multipliers)``
====================================  ===============================  ===========================

In step ``c`` of an elementwise node, lane ``l`` computes element ``c * lanes + l`` (row-major).
A row reduction's lane ``l`` folds row ``g * lanes + l`` one column per step, left to right. A
matmul's multiplier ``u`` computes, in step ``c``, product number ``p = c * U + u`` of the
sequence ordered ``k`` slowest (``p = k * M * N + i * N + j``), or ``i`` slowest when ``a`` has
a dynamic row count (``p = i * K * N + k * N + j``); the products of a step are added to their
outputs' running sums. A node over dynamic rows is built for the bound and needs only the first
:meth:`~_Node.steps_for` ``(rows)`` steps (the PCU skips the rest). Every arithmetic unit wraps like the reference
(:mod:`stepforge.contract.arith`): integer sums are modular, so the hardware's order of additions
gives the same bits as the reference's sequential order.

**Pipelining.** A node is issued its steps (:class:`Issue`: the step, whether it is issued,
whether the beat has data, the pipeline's enable) and, with ``latency`` ``d > 0`` (its
:attr:`~_Node.depth`, chosen by the PCU), writes each step ``d`` pipeline moves later: operands
are registered at the issue, results at the cuts, and every register moves with the one enable
(the PCU's, low while the output waits). Multipliers are :func:`pipelined_product` (a DSP
block's input and output registers; ``MULT18X18D`` instances for an ECP5 platform,
:func:`dsp_family`). A matmul sums the products of an output by a registered adder tree
(``terms``: the most products one output gets in a step) into a running sum whose register is
the only adder in its loop; an output's first step of a beat starts it from the fused operand or
0 (decided by a register of its own, a stage ahead). A ``mac`` that is the PCU's whole
accumulator adds into it and restarts it itself after a resetting beat (one enable, one reset
per register, no multiplexer in the loop); stop-only beats add zero products, so the running
sum's ``nxt`` is the accumulator at every beat's output stage. With ``family="ice40"`` the
32-bit running sums are two 16-bit halves a stage apart (carry registered) and operands and
products pass a fabric register next to the ``SB_MAC16``. Elementwise nodes issued after a
pipelined node read their input-port operands at the sequencer's step and carry them through a
register per lane and move.

The fixed-point ``exp``, ``silu`` and ``rsqrt`` ALUs (:func:`fixed_point_alu`) follow the
integer sequences of :mod:`stepforge.contract.fixedpoint` step for step and read their breakpoints
from :func:`~stepforge.contract.fixedpoint.spec`, held in a ROM (:class:`amaranth.lib.memory.Memory`
with one combinational read port per lane) of ``(base, delta)`` pairs, one per segment.

Pipelined depths (:attr:`_Node.depth`): ``matmul``/``mac`` ``2 + ceil(log2(terms))``, plus one
where products go straight into the running sums on an FPGA family, and on the iCE40 one for the
fabric operand registers and one for the split sum; ``mul`` 2 (iCE40 3); ``div``
``1 + ceil(bits / 2)`` (iCE40 ``1 + bits``); ``exp``/``silu``/``rsqrt`` 5; the others 0.

Modules: :mod:`.tile` (:class:`HTile`, wrapping), :mod:`.issue` (:class:`Issue`), :mod:`.node`
(what the node circuits share), :mod:`.elementwise`, :mod:`.row_reduce` and :mod:`.matmul` (the
node circuits), :mod:`.alu` (one lane: :func:`lane_op`, :class:`Stager`), :mod:`.divide`,
:mod:`.fixed_point` (:func:`fixed_point_alu`, :func:`segment_rom`) and :mod:`.dsp`
(:func:`dsp_family`, :func:`pipelined_product`).
"""

from .alu import Stager, lane_depth, lane_op
from .divide import DIVIDE_BITS_PER_CUT
from .dsp import dsp_family, pipelined_product
from .elementwise import ElementwiseNode
from .fixed_point import fixed_point_alu, segment_rom
from .issue import Issue
from .matmul import MatmulNode
from .row_reduce import RowReduceNode
from .tile import HTile, ceil_div, clamp, wrap

__all__ = ["HTile", "ceil_div", "wrap", "clamp", "lane_op", "fixed_point_alu", "segment_rom",
           "dsp_family", "Issue", "pipelined_product", "ElementwiseNode", "RowReduceNode",
           "MatmulNode", "Stager", "lane_depth", "DIVIDE_BITS_PER_CUT"]
