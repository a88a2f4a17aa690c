"""The PCU (pattern compute unit): Map, Accum and Scan of a tile function as a time-multiplexed
integer datapath (:class:`PCU`).

Modules: :mod:`.pcu` (the component: its checks, ports and elaboration), :mod:`.checks` (what
it accepts), :mod:`.plan` (node circuits, steps and the pipeline schedule), :mod:`.datapath`
(the nodes built at elaboration), :mod:`.retile` (the growing accumulator of
``retile_row``/``retile_col``) and :mod:`.assign` (values into registers and beats). The node
circuits themselves are :mod:`stepforge.hdl.tile_ops`.
"""

from .checks import HW_DTYPES, MODES
from .pcu import PCU

__all__ = ["PCU", "MODES", "HW_DTYPES"]
