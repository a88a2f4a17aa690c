"""The PCU's datapath pieces: tile values, per-element ALUs and the time-multiplexed node circuits."""

from .matmul import (DIVIDE_BITS_PER_CUT, ElementwiseNode, HTile, Issue, MatmulNode, RowReduceNode,
                     Stager, ceil_div, clamp, dsp_family, fixed_point_alu, lane_depth, lane_op,
                     pipelined_product, segment_rom, wrap)

__all__ = ["HTile", "ceil_div", "wrap", "clamp", "lane_op", "fixed_point_alu", "segment_rom",
           "dsp_family", "Issue", "pipelined_product", "ElementwiseNode", "RowReduceNode",
           "MatmulNode", "Stager", "lane_depth", "DIVIDE_BITS_PER_CUT"]
