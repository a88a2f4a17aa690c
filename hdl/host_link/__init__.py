"""The host link in hardware: a UART bridge between a host and a System.

Public surface:

* :class:`HostLinkTop` (``top.py``): ``HostLinkTop(system, *, clock_hz, baud)``, a board's whole
  design; its only ports are ``uart_rx``, ``uart_tx`` and ``leds`` (running, done, error,
  deadlock). :func:`design_id` is the identity it reports.
* :class:`HostBridge` (``bridge.py``): frames of :mod:`stepforge.contract.host_protocol` to the
  System's word port, CSR port and ``start``.
* :class:`UartRx`, :class:`UartTx`, :func:`baud_divisor` (``uart.py``).
"""

from .bridge import HostBridge
from .top import HostLinkTop, design_id
from .uart import MIN_DIVISOR, UartRx, UartTx, baud_divisor

__all__ = ["HostLinkTop", "HostBridge", "UartRx", "UartTx", "baud_divisor", "design_id",
           "MIN_DIVISOR"]
