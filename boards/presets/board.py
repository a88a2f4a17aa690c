"""A board preset: the FPGA, its clock, the host link's pins and baud, a fitted machine, flashing.

A :class:`Board` takes its device, package, oscillator and pins from the board's
``amaranth-boards`` platform (the resources a board file defines, with their pin names, I/O
standards and pull-ups; a connector pin is resolved to its package pin), so a preset names the
resources it uses rather than pins. :meth:`Board.pin` gives one resource's package pin(s),
inversion, direction and I/O attributes; :mod:`~stepforge.boards.constraints` writes them as the
nextpnr constraints file of a build.
"""

from dataclasses import dataclass, field

from amaranth.build import Pins, Subsignal

__all__ = ["Board", "Loader", "Pin", "PinRef"]


@dataclass(frozen=True)
class PinRef:
    """A one-bit pin of a platform resource: ``resource`` number ``number``, a subsignal
    (``"rx"`` of ``"uart"``) when the resource has several, and the bit ``index`` of a
    subsignal of several pins (``"a"`` of ``"sdram"``)."""
    resource: str
    number: int = 0
    subsignal: str | None = None
    index: int | None = None

    def __str__(self):
        return (f"{self.resource}#{self.number}" + (f".{self.subsignal}" if self.subsignal else "")
                + (f"[{self.index}]" if self.index is not None else ""))


@dataclass(frozen=True)
class Pin:
    """A resolved pin: the package ``site`` (``"M1"``, ``"35"``), its ``direction`` (``"i"``,
    ``"o"``, ``"io"``), whether the board inverts it (``invert``: an active-low LED) and its
    I/O attributes (``{"IO_TYPE": "LVCMOS33", "PULLMODE": "UP"}``)."""
    site: str
    direction: str
    invert: bool
    attrs: dict


@dataclass(frozen=True)
class Loader:
    """How ``stepforge flash`` loads a bitstream: ``openFPGALoader`` with ``args`` (``-b
    BOARD`` or ``-c CABLE``), through ``cable`` (its USB id in words, for the message when no
    board answers); ``target`` says where the bitstream goes (``"sram"``: lost at power-off,
    ``"flash"``: kept)."""
    args: tuple
    cable: str
    target: str
    note: str = ""


@dataclass(frozen=True)
class Board:
    """A board that ``stepforge build --board`` and ``stepforge flash --board`` know.

    Parameters
    ----------
    name : str
        The ``--board`` name (``"icebreaker"``).
    title : str
        The board in words.
    platform : type
        Its ``amaranth-boards`` platform class (device, package, clock and pins).
    device : stepforge.boards.devices.Device
        The FPGA flow's device (part, package and speed grade as nextpnr takes them).
    clock_hz : int
        The design's clock: the oscillator's, or the PLL's output when ``pll`` is set.
    pll : bool
        Derive ``clock_hz`` from the oscillator with the family's PLL (ECP5 ``EHXPLLL``).
    uart_rx, uart_tx : PinRef
        The host link's serial lines (the FPGA's receive and transmit).
    baud : int
        The host link's line rate.
    leds : tuple of PinRef
        Status LEDs (the host link's ``leds`` in order; extra link bits stay off the board).
    config : callable
        ``config()`` -> the :class:`~stepforge.hdl.config.HardwareConfig` fitted to the chip,
        its ``clock_hz`` equal to ``clock_hz``.
    loader : Loader
    extra_resources : tuple
        Resources added to the platform (a UART on header pins the board file lacks).
    notes : str
        What a user must know (the host-link choice, jumpers).
    """
    name: str
    title: str
    platform: type
    device: object
    clock_hz: int
    uart_rx: PinRef
    uart_tx: PinRef
    baud: int
    config: object
    loader: Loader
    leds: tuple = ()
    pll: bool = False
    extra_resources: tuple = field(default_factory=tuple)
    notes: str = ""

    def __repr__(self):
        return f"get_board({self.name!r})"

    def hardware_config(self, tile=None):
        """The board's :class:`~stepforge.hdl.config.HardwareConfig`: :attr:`config`'s, with the
        hardware tile ``tile`` (``(rows, cols)``) instead of the preset's when given (a smaller
        tile narrows every beat, FIFO and register: how a larger program fits a small chip)."""
        return self.config().with_tile(tile)

    def new_platform(self):
        """An instance of :attr:`platform` with :attr:`extra_resources` added."""
        platform = self.platform()
        if self.extra_resources:
            platform.add_resources(list(self.extra_resources))
        return platform

    @property
    def clock(self):
        """The oscillator's :class:`PinRef` (the platform's default clock)."""
        return PinRef(self.platform.default_clk)

    @property
    def oscillator_hz(self):
        """The frequency of the board's oscillator."""
        return int(self.new_platform().default_clk_frequency)

    def pin(self, ref):
        """The :class:`Pin` of ``ref`` (a :class:`PinRef`).

        Raises
        ------
        LookupError
            The platform has no such resource or subsignal, or it is not one bit wide.
        """
        platform = self.new_platform()
        try:
            resource = platform.lookup(ref.resource, ref.number)
        except Exception as exc:   # amaranth raises ResourceError, a subclass of Exception
            raise LookupError(f"board {self.name!r} has no resource {ref}: {exc}") from None
        attrs = dict(resource.attrs)
        ios = resource.ios
        if ref.subsignal is not None:
            sub = next((io for io in ios if isinstance(io, Subsignal) and io.name == ref.subsignal),
                       None)
            if sub is None:
                raise LookupError(f"board {self.name!r} has no resource {ref}: "
                                  f"{ref.resource!r} has no subsignal {ref.subsignal!r}")
            attrs.update(sub.attrs)
            ios = sub.ios
        pins = [io for io in ios if isinstance(io, Pins)]
        if len(pins) != 1 or (len(pins[0].names) != 1 and ref.index is None):
            raise LookupError(f"board {self.name!r} resource {ref} is not a single pin")
        sites = pins[0].map_names(platform._conn_pins, resource)
        if ref.index is not None and not 0 <= ref.index < len(sites):
            raise LookupError(f"board {self.name!r} resource {ref}: {len(sites)} pins, no bit "
                              f"{ref.index}")
        site = sites[0 if ref.index is None else ref.index]
        return Pin(site, pins[0].dir, pins[0].invert, {k: str(v) for k, v in attrs.items()})
