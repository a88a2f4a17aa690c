"""The PCU (pattern compute unit): Map, Accum and Scan of a tile function as a time-multiplexed
integer datapath (:class:`PCU`)."""

from .pcu import HW_DTYPES, MODES, PCU

__all__ = ["PCU", "MODES", "HW_DTYPES"]
