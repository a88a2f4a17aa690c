"""Stream source and sink for cocotb testbenches of Amaranth components.

Amaranth names the Verilog ports of a stream member by joining the path with ``__``: a member
``i`` of signature ``stream.Signature(...)`` becomes ``i__payload``, ``i__valid`` and ``i__ready``.
:class:`StreamSource` drives such an input stream and :class:`StreamSink` consumes an output
stream, both under random valid/ready patterns.

Timing discipline (all components here are clocked on the rising edge): both classes change
the signals they drive just after a rising edge and sample the DUT's signals at the falling edge,
when everything has settled. A transfer happens at a rising edge when ``valid`` and ``ready``
were both high at the preceding falling edge. The sink also checks the stream rules on the
DUT's output: once ``valid`` is high, neither ``valid`` nor ``payload`` may change until the
transfer.

Payloads are plain ints (the bits of the port); pack them with
:func:`stepforge.contract.beat.pack_beat` and the same layout the hardware uses.
"""

import random
from collections import deque

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

__all__ = ["stream_ports", "reset", "StreamSource", "StreamSink"]


def stream_ports(dut, prefix):
    """The ``(payload, valid, ready)`` handles of the stream member ``prefix`` of ``dut``."""
    return tuple(getattr(dut, f"{prefix}__{name}") for name in ("payload", "valid", "ready"))


async def reset(dut, clock, cycles=2):
    """Hold the ``rst`` port high for ``cycles`` rising edges of ``clock``, then release it."""
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(clock)
    dut.rst.value = 0


class StreamSource:
    """Drives an input stream ``<prefix>__payload/valid`` and watches ``<prefix>__ready``.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    prefix : str
        The stream member's port prefix (``"i"`` for ``i__payload``).
    clock : cocotb handle
        The clock (the DUT's ``clk``).
    valid_prob : float
        Probability of offering the next queued payload on a cycle where none is offered.
    rng : random.Random, optional
        Source of randomness (defaults to a new ``Random(0)``).

    Attributes
    ----------
    sent : int
        Payloads accepted by the DUT so far.
    """

    def __init__(self, dut, prefix, clock, *, valid_prob=1.0, rng=None):
        self.payload, self.valid, self.ready = stream_ports(dut, prefix)
        self.clock = clock
        self.valid_prob = valid_prob
        self.rng = rng or random.Random(0)
        self.sent = 0
        self._queue = deque()
        self._task = None
        self.valid.value = 0

    def send(self, payloads):
        """Queue ``payloads`` (ints) for sending, in order."""
        self._queue.extend(int(p) for p in payloads)

    @property
    def pending(self):
        """Payloads queued or offered and not yet accepted."""
        return len(self._queue)

    def start(self):
        """Start driving (call after reset); returns the driver's task."""
        self._task = cocotb.start_soon(self._drive())
        return self._task

    async def _drive(self):
        offered = False
        await RisingEdge(self.clock)
        while True:
            if not offered and self._queue and self.rng.random() < self.valid_prob:
                self.payload.value = self._queue[0]
                offered = True
            self.valid.value = int(offered)
            await FallingEdge(self.clock)
            accepted = offered and int(self.ready.value) == 1
            await RisingEdge(self.clock)
            if accepted:
                self._queue.popleft()
                self.sent += 1
                offered = False


class StreamSink:
    """Consumes an output stream ``<prefix>__payload/valid``, driving ``<prefix>__ready``.

    Parameters
    ----------
    dut, prefix, clock, rng
        As for :class:`StreamSource`.
    ready_prob : float
        Probability that ``ready`` is high on a cycle; may be changed while running.

    Attributes
    ----------
    items : list of int
        Payloads received so far, in order.
    """

    def __init__(self, dut, prefix, clock, *, ready_prob=1.0, rng=None):
        self.payload, self.valid, self.ready = stream_ports(dut, prefix)
        self.prefix = prefix
        self.clock = clock
        self.ready_prob = ready_prob
        self.rng = rng or random.Random(1)
        self.items = []
        self._task = None
        self.ready.value = 0

    def start(self):
        """Start consuming (call after reset); returns the monitor's task."""
        self._task = cocotb.start_soon(self._consume())
        return self._task

    async def _consume(self):
        held = None  # payload that was valid and not taken at the last edge
        await RisingEdge(self.clock)
        while True:
            ready = self.rng.random() < self.ready_prob
            self.ready.value = int(ready)
            await FallingEdge(self.clock)
            valid = int(self.valid.value) == 1
            payload = self.payload.value.to_unsigned() if valid else None
            if held is not None:
                assert valid, f"{self.prefix}__valid dropped before the transfer of {held:#x}"
                assert payload == held, (f"{self.prefix}__payload changed from {held:#x} to "
                                         f"{payload:#x} before the transfer")
            await RisingEdge(self.clock)
            if valid and ready:
                self.items.append(payload)
                held = None
            else:
                held = payload

    async def wait_for(self, count, *, timeout_cycles):
        """Wait until ``count`` payloads have arrived; fail after ``timeout_cycles`` cycles."""
        for _ in range(timeout_cycles):
            if len(self.items) >= count:
                return
            await RisingEdge(self.clock)
        assert len(self.items) >= count, (f"only {len(self.items)} of {count} payloads after "
                                          f"{timeout_cycles} cycles")
