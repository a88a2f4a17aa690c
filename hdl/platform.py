"""The device family a design is elaborated for, as Amaranth's vendor platforms expose it."""

from .config import FAMILIES

__all__ = ["FamilyPlatform", "platform_family"]


def platform_family(platform):
    """The ``family`` of the platform a unit is elaborated for (``"ecp5"``, ``"ice40"``, ...),
    or None without one (the simulation target) or for a platform that has none."""
    return getattr(platform, "family", None)


class FamilyPlatform:
    """A stand-in for an Amaranth vendor platform that carries only its ``family``.

    Units that instantiate a device's primitives when they are elaborated for it (the PCU's
    ``MULT18X18D`` with its registers inside, :func:`~stepforge.hdl.tile_ops.dsp_family`) read
    ``platform.family``, as Amaranth's ``LatticePlatform`` has it; a board build elaborates its
    units with this object, so the Verilog holds the primitives while the simulation target
    (no platform) stays generic.

    Parameters
    ----------
    family : {"ecp5", "ice40"}
    """

    def __init__(self, family):
        if family is None or family not in FAMILIES:
            raise ValueError(f"FamilyPlatform family must be one of "
                             f"{', '.join(repr(f) for f in FAMILIES if f)}, not {family!r}")
        self.family = family

    def __repr__(self):
        return f"FamilyPlatform({self.family!r})"
