"""The host link's framed protocol, shared by the bridge in hardware and the host driver.

Pure Python (no Amaranth): the constants, the CRC and the frame encoders/decoders that
:mod:`stepforge.hdl.host_link` implements in gates and :mod:`stepforge.boards.host` speaks over
a serial line.

Frame
-----
Both directions use one frame::

    SYNC  CMD  SEQ  LEN_LO LEN_HI  PAYLOAD (LEN bytes)  CRC_HI CRC_LO

* ``SYNC`` is :data:`SYNC` (0xA5). Bytes before it are ignored by the receiver.
* ``CMD`` is a command code (:class:`Command`); a reply carries ``CMD | REPLY`` (0x80).
* ``SEQ`` is chosen by the host and echoed by the reply, so a late or stray reply is never taken
  for the answer to another frame.
* ``LEN`` is the payload's length in bytes (little-endian, at most :func:`max_len`).
* ``CRC`` is CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF, no reflection, no final
  XOR) of ``CMD`` through the last payload byte, sent most significant byte first, so the CRC of
  everything after ``SYNC`` including the CRC itself is 0 (:func:`crc16`). It detects every error
  of up to 3 bits and every burst of up to 16 bits in a frame of the sizes used here. CRC-16
  rather than CRC-8: a frame holds up to 522 bytes, where an 8-bit check would let one corrupted
  frame in 256 through.

A reply's payload starts with a status byte (:class:`Status`), followed by data for
``INFO``, ``READ``, ``CSR`` and ``STATUS`` when the status is ``OK`` (none otherwise).

Commands (all integers little-endian; addresses in memory words of ``word_bytes`` bytes)
---------------------------------------------------------------------------------------
=========  =====================================  ============================================
command    request payload                        reply data (after the status byte)
=========  =====================================  ============================================
INFO       (none)                                 :data:`INFO_FORMAT`: version, word_bytes,
                                                  addr_bits, max_data, design id, clock, baud
WRITE      addr u32, then ``n >= 1`` words        (none)
READ       addr u32, count u16                    ``count`` words
CSR        first u16, count u16                   ``count`` CSRs (u32 each) from ``first``
START      (none)                                 (none)
STATUS     (none)                                 :data:`STATUS_FORMAT`: flags, cycles,
                                                  error unit, error code
RESET      (none)                                 (none): the program's units, FIFOs,
                                                  counters and memory pipeline are reset and
                                                  it may be started again (memory contents
                                                  stay)
=========  =====================================  ============================================

A ``WRITE`` carries at most ``max_data`` bytes of words, a ``READ`` asks for at most
``max_data // word_bytes`` words, a ``CSR`` for at most ``max_data // 4`` registers.

Errors
------
A frame is executed only when it is whole and its CRC, command, length and arguments are right;
otherwise it changes nothing and is answered with an error status. A frame whose bytes stop for
longer than the bridge's timeout is answered ``TIMEOUT``. After any other error the bridge
discards input until the line has been quiet for that timeout and only then replies, so a host
that retries as soon as it has the reply is never read as the tail of the bad frame. ``WRITE``
and ``READ`` are refused (``BUSY``) while the program runs; ``START`` is refused (``STARTED``)
once the program has been started, until a ``RESET``.
"""

import enum
import struct

__all__ = ["SYNC", "REPLY", "VERSION", "MAX_DATA", "CRC_INIT", "CRC_POLY", "HEADER_BYTES",
           "FRAME_OVERHEAD", "INFO_FORMAT", "INFO_BYTES", "STATUS_FORMAT", "STATUS_BYTES",
           "Command", "Status", "Flags", "Frame", "ProtocolError", "crc16", "crc16_update",
           "max_len", "encode", "reply", "write_payload", "read_payload", "csr_payload",
           "decode", "parse", "Info", "RunStatus"]

#: The first byte of every frame.
SYNC = 0xA5
#: ORed into a command code in its reply.
REPLY = 0x80
#: The protocol version reported by ``INFO``.
VERSION = 1
#: Default bytes of data in one WRITE or READ frame (the bridge's write buffer).
MAX_DATA = 512
CRC_INIT = 0xFFFF
CRC_POLY = 0x1021
#: SYNC, CMD, SEQ, LEN (two bytes).
HEADER_BYTES = 5
#: Header and CRC: the bytes of a frame besides its payload.
FRAME_OVERHEAD = HEADER_BYTES + 2
#: ``INFO`` reply data: version u8, word_bytes u8, addr_bits u8, reserved u8, max_data u16,
#: reserved u16, design id u32, clock in Hz u32, baud u32.
INFO_FORMAT = "<BBBBHHIII"
INFO_BYTES = struct.calcsize(INFO_FORMAT)
#: ``STATUS`` reply data: flags u8 (:class:`Flags`), then the cycle counter, the error unit and
#: the error code as the System's CSRs hold them (u32 each).
STATUS_FORMAT = "<BIII"
STATUS_BYTES = struct.calcsize(STATUS_FORMAT)


class Command(enum.IntEnum):
    """Request codes (module doc)."""
    INFO = 0x01
    WRITE = 0x02
    READ = 0x03
    CSR = 0x04
    START = 0x05
    STATUS = 0x06
    RESET = 0x07


class Status(enum.IntEnum):
    """The first payload byte of a reply."""
    OK = 0
    #: the CRC does not match
    CRC = 1
    #: the length is wrong for the command, or longer than the bridge takes
    LENGTH = 2
    #: unknown command code
    COMMAND = 3
    #: the frame's bytes stopped before its end
    TIMEOUT = 4
    #: a UART framing error (or a byte lost to overrun) inside the frame
    FRAMING = 5
    #: memory access while the program runs
    BUSY = 6
    #: START after the program was started (and not reset)
    STARTED = 7
    #: an address range past the end of memory, or a count of 0
    RANGE = 8


class Flags(enum.IntFlag):
    """``STATUS`` flags."""
    RUNNING = 1
    DONE = 2
    ERROR = 4
    DEADLOCK = 8
    STARTED = 16


class ProtocolError(ValueError):
    """Bytes that are not a well-formed frame (the message says why)."""


def crc16_update(crc, byte):
    """The CRC-16/CCITT-FALSE register after one more ``byte`` (most significant bit first)."""
    crc ^= byte << 8
    for _ in range(8):
        crc = ((crc << 1) ^ CRC_POLY if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def crc16(data, crc=CRC_INIT):
    """CRC-16/CCITT-FALSE of ``data`` (``crc16(b"123456789") == 0x29B1``)."""
    for b in data:
        crc = crc16_update(crc, b)
    return crc


def max_len(max_data=MAX_DATA):
    """The longest payload a bridge with a ``max_data``-byte buffer takes (a WRITE's)."""
    return 4 + max_data


class Frame:
    """A decoded frame: ``cmd``, ``seq`` and ``payload`` (bytes).

    For a reply, :attr:`command` is the request it answers, :attr:`status` its status byte and
    :attr:`data` the rest of the payload.
    """
    __slots__ = ("cmd", "seq", "payload")

    def __init__(self, cmd, seq, payload=b""):
        self.cmd, self.seq, self.payload = cmd, seq, bytes(payload)

    def __repr__(self):
        return f"Frame(0x{self.cmd:02x}, {self.seq}, {self.payload!r})"

    def __eq__(self, other):
        return (isinstance(other, Frame) and (self.cmd, self.seq, self.payload)
                == (other.cmd, other.seq, other.payload))

    @property
    def is_reply(self):
        return bool(self.cmd & REPLY)

    @property
    def command(self):
        return self.cmd & ~REPLY

    @property
    def status(self):
        if not self.payload:
            raise ProtocolError(f"reply to command 0x{self.command:02x} has no status byte")
        try:
            return Status(self.payload[0])
        except ValueError:
            raise ProtocolError(f"unknown status {self.payload[0]} in a reply") from None

    @property
    def data(self):
        return self.payload[1:]


def encode(cmd, seq, payload=b""):
    """The bytes of a frame (module doc)."""
    if not 0 <= cmd <= 0xFF or not 0 <= seq <= 0xFF:
        raise ValueError(f"frame cmd and seq must be bytes, not {cmd!r}, {seq!r}")
    payload = bytes(payload)
    if len(payload) > 0xFFFF:
        raise ValueError(f"frame payload must be at most 65535 bytes, not {len(payload)}")
    body = bytes([cmd, seq]) + len(payload).to_bytes(2, "little") + payload
    return bytes([SYNC]) + body + crc16(body).to_bytes(2, "big")


def reply(cmd, seq, status, data=b""):
    """The bytes of the reply to ``cmd``: its status byte, then ``data``."""
    return encode(cmd | REPLY, seq, bytes([int(status)]) + bytes(data))


def write_payload(addr, data):
    """A ``WRITE`` payload: word address ``addr`` and the words' bytes ``data``."""
    return addr.to_bytes(4, "little") + bytes(data)


def read_payload(addr, count):
    """A ``READ`` payload: ``count`` words from word address ``addr``."""
    return struct.pack("<IH", addr, count)


def csr_payload(first, count):
    """A ``CSR`` payload: ``count`` registers from address ``first``."""
    return struct.pack("<HH", first, count)


def parse(buf):
    """``(frame or None, bytes used)``: the first whole frame in ``buf``.

    Bytes before the first :data:`SYNC` are skipped (and counted as used). Returns
    ``(None, used)`` when no whole frame is in ``buf`` yet.

    Raises
    ------
    ProtocolError
        A whole frame whose CRC does not match (``used`` bytes, through the frame, are in
        ``exc.used``).
    """
    start = bytes(buf).find(SYNC)
    if start < 0:
        return None, len(buf)
    if len(buf) - start < HEADER_BYTES:
        return None, start
    n = int.from_bytes(buf[start + 3:start + 5], "little")
    end = start + HEADER_BYTES + n + 2
    if len(buf) < end:
        return None, start
    body = bytes(buf[start + 1:end])
    if crc16(body) != 0:
        exc = ProtocolError(f"frame CRC mismatch (cmd 0x{body[0]:02x}, seq {body[1]}, "
                            f"{n} payload bytes)")
        exc.used = end
        raise exc
    return Frame(body[0], body[1], body[4:4 + n]), end


def decode(data):
    """The frame that ``data`` is, exactly (no bytes before or after it)."""
    frame, used = parse(data)
    if frame is None or used != len(data) or data[:1] != bytes([SYNC]):
        raise ProtocolError(f"{len(data)} bytes are not exactly one frame")
    return frame


class Info:
    """The ``INFO`` reply's fields (:data:`INFO_FORMAT`)."""
    __slots__ = ("version", "word_bytes", "addr_bits", "max_data", "design_id", "clock_hz",
                 "baud")

    def __init__(self, version, word_bytes, addr_bits, max_data, design_id, clock_hz, baud):
        self.version, self.word_bytes, self.addr_bits = version, word_bytes, addr_bits
        self.max_data, self.design_id = max_data, design_id
        self.clock_hz, self.baud = clock_hz, baud

    def __repr__(self):
        return (f"Info(version={self.version}, word_bytes={self.word_bytes}, "
                f"addr_bits={self.addr_bits}, max_data={self.max_data}, "
                f"design_id=0x{self.design_id:08x}, clock_hz={self.clock_hz}, baud={self.baud})")

    def pack(self):
        return struct.pack(INFO_FORMAT, self.version, self.word_bytes, self.addr_bits, 0,
                           self.max_data, 0, self.design_id, self.clock_hz, self.baud)

    @classmethod
    def unpack(cls, data):
        if len(data) != INFO_BYTES:
            raise ProtocolError(f"INFO data must be {INFO_BYTES} bytes, not {len(data)}")
        v, wb, ab, _, md, _, did, clk, baud = struct.unpack(INFO_FORMAT, data)
        return cls(v, wb, ab, md, did, clk, baud)


class RunStatus:
    """The ``STATUS`` reply's fields (:data:`STATUS_FORMAT`)."""
    __slots__ = ("flags", "error_code", "error_unit", "cycles")

    def __init__(self, flags, error_code, error_unit, cycles):
        self.flags, self.error_code = Flags(flags), error_code
        self.error_unit, self.cycles = error_unit, cycles

    def __repr__(self):
        return (f"RunStatus(flags={self.flags!r}, error_code={self.error_code}, "
                f"error_unit={self.error_unit}, cycles={self.cycles})")

    def pack(self):
        return struct.pack(STATUS_FORMAT, int(self.flags), self.cycles, self.error_unit,
                           self.error_code)

    @classmethod
    def unpack(cls, data):
        if len(data) != STATUS_BYTES:
            raise ProtocolError(f"STATUS data must be {STATUS_BYTES} bytes, not {len(data)}")
        flags, cycles, unit, code = struct.unpack(STATUS_FORMAT, data)
        return cls(flags, code, unit, cycles)

    @property
    def state(self):
        """``"idle"``, ``"running"``, ``"done"``, ``"error"`` or ``"deadlock"``."""
        for flag, name in ((Flags.ERROR, "error"), (Flags.DEADLOCK, "deadlock"),
                           (Flags.DONE, "done"), (Flags.RUNNING, "running")):
            if self.flags & flag:
                return name
        return "running" if self.flags & Flags.STARTED else "idle"
