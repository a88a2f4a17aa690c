"""The host driver: a program's run on a board over the UART host link.

:class:`HostLink` speaks :mod:`stepforge.contract.host_protocol` over any object with
pyserial's ``write``/``read``/``flush``/``in_waiting``/``reset_input_buffer`` (a
``serial.Serial`` on a real port, the same on the pseudo-terminal of ``--port sim``). Every
request waits for its reply, matched by sequence number and command and checked by its CRC and
length; a reply that does not come, comes corrupted, or reports a transmission error (``CRC``,
``TIMEOUT``, ``FRAMING``, ``LENGTH``) sends the frame again, at most ``retries`` times, and then
raises :class:`LinkError`; after a missing or corrupted reply the driver first waits for the
line to go quiet, so the rest of that reply is not read as the next one. Every command is idempotent except ``START``, whose retry accepts
``STARTED`` only when an earlier attempt may have reached the board. So a run either returns
what the board computed or raises: never a wrong answer.

:func:`run_on_board` checks that the board runs this program (``INFO``: protocol version, word
size, design id), resets it (so a board runs any number of times), loads the job (:mod:`stepforge.boards.host.job`), starts, polls ``STATUS`` with
a progress line until the run ends or ``timeout`` seconds pass, reads every CSR and the outputs
back and decodes them into a :class:`BoardResult` shaped like
:class:`~stepforge.sim.rtl.run.RTLResult`.
"""

import time
from dataclasses import dataclass, field

from ...contract import host_protocol as hp
from ...hdl.host_link import design_id
from ...sim.rtl.run import RTLResult
from .job import decode, make_job

__all__ = ["LinkError", "HostLink", "BoardResult", "run_on_board", "open_serial"]

C, S = hp.Command, hp.Status
#: Reply statuses that a corrupted or cut request produces: the request is sent again.
RETRY = (S.CRC, S.TIMEOUT, S.FRAMING, S.LENGTH)


class LinkError(RuntimeError):
    """The board is unknown, did not answer, answered an error, or runs another design.

    Attributes
    ----------
    status : Status or None
        The board's error status, or None when no valid reply came.
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def open_serial(port, baud, *, timeout=0.02):
    """``serial.Serial(port, baud)``, with a clear message when the port cannot be opened."""
    import serial  # pyserial: a dev dependency, needed only to talk to a board

    try:
        return serial.Serial(port, baudrate=baud, timeout=timeout, write_timeout=10)
    except serial.SerialException as exc:
        raise LinkError(f"cannot open the serial port {port!r} ({exc}); check the board is "
                        "connected, the port name (ls /dev/ttyUSB* /dev/ttyACM*) and your "
                        "permission on it (the dialout group)") from exc


@dataclass
class LinkStats:
    """Frames sent, retries, bytes each way."""
    frames: int = 0
    retries: int = 0
    sent: int = 0
    received: int = 0
    errors: list = field(default_factory=list)


class HostLink:
    """Requests and replies over a serial port (module doc).

    Parameters
    ----------
    port : serial.Serial or compatible
    baud : int
        The line rate (bounds how long a reply may take).
    retries : int, default 4
        Extra attempts of a request after a failed one.
    timeout : float, default 0.5
        Seconds a reply may take beyond its bytes' time on the line.
    byte_seconds : float, optional
        Seconds per byte on the line (default ``10 / baud``, times 2 for slack).
    """

    def __init__(self, port, baud, *, retries=4, timeout=0.5, byte_seconds=None):
        self.port = port
        self.baud = baud
        self.retries = retries
        self.timeout = timeout
        self.byte_seconds = byte_seconds if byte_seconds is not None else 20 / baud
        self.seq = 0
        self.stats = LinkStats()
        self.info = None
        self._buf = bytearray()

    def __repr__(self):
        return f"HostLink({self.port!r}, {self.baud}, retries={self.retries})"

    def _next_seq(self):
        self.seq = (self.seq + 1) & 0xFF
        return self.seq

    def _reply(self, seq, cmd, deadline):
        """The reply to ``(seq, cmd)``, or None at ``deadline`` or on a corrupted reply."""
        while True:
            while True:
                try:
                    frame, used = hp.parse(self._buf)
                except hp.ProtocolError as exc:
                    del self._buf[:exc.used]
                    self.stats.errors.append(f"corrupted reply: {exc}")
                    return None
                del self._buf[:used]
                if frame is None:
                    break
                if frame.cmd == cmd | hp.REPLY and frame.seq == seq:
                    return frame
                self.stats.errors.append(f"stray reply {frame!r}")
            if time.monotonic() >= deadline:
                return None
            chunk = self.port.read(max(1, self.port.in_waiting))
            self.stats.received += len(chunk)
            self._buf += chunk

    def _drain(self):
        """Discard input until the line has been quiet for 20 byte times (at least 50 ms): the
        rest of a corrupted reply must not be read as the start of the next one."""
        quiet = max(0.05, 20 * self.byte_seconds)
        last = time.monotonic()
        limit = last + self.timeout + 2 * (hp.MAX_DATA + 16) * self.byte_seconds
        while time.monotonic() - last < quiet and time.monotonic() < limit:
            if self.port.read(max(1, self.port.in_waiting)):
                last = time.monotonic()
        self._buf.clear()
        self.port.reset_input_buffer()

    def request(self, cmd, payload=b"", *, reply_bytes=0, accept=(S.OK,)):
        """Send a request and return its reply (a :class:`~stepforge.contract.host_protocol.Frame`
        whose status is in ``accept``), retrying as the module doc says.

        ``reply_bytes`` is the reply's expected data length (for the deadline). Returns
        ``(reply, attempt)``, ``attempt`` counting from 0.
        """
        last = None
        for attempt in range(self.retries + 1):
            seq = self._next_seq()
            frame = hp.encode(cmd, seq, payload)
            self.port.write(frame)
            self.port.flush()
            self.stats.frames += 1
            self.stats.sent += len(frame)
            if attempt:
                self.stats.retries += 1
            nbytes = len(frame) + hp.FRAME_OVERHEAD + 1 + reply_bytes
            reply = self._reply(seq, cmd, time.monotonic() + self.timeout
                                + nbytes * self.byte_seconds)
            if reply is None:
                last = f"no valid reply to {C(cmd).name} (seq {seq})"
                self._drain()
                continue
            status = reply.status
            if status in accept:
                return reply, attempt
            if status in RETRY:
                last = f"the board answered {status.name} to {C(cmd).name}"
                self.stats.errors.append(last)
                continue
            raise LinkError(f"the board refused {C(cmd).name}: {status.name}", status)
        raise LinkError(f"{last}; gave up after {self.retries + 1} attempts")

    # ---- commands
    def get_info(self):
        reply, _ = self.request(C.INFO, reply_bytes=hp.INFO_BYTES)
        self.info = hp.Info.unpack(reply.data)
        return self.info

    def status(self):
        reply, _ = self.request(C.STATUS, reply_bytes=hp.STATUS_BYTES)
        return hp.RunStatus.unpack(reply.data)

    def reset(self):
        """Reset the board's program (its memory keeps its contents) so it can start again."""
        self.request(C.RESET)

    def start(self):
        reply, attempt = self.request(C.START, accept=(S.OK, S.STARTED))
        if reply.status == S.STARTED and attempt == 0:
            raise LinkError("the board's program was started before this run (RESET it first)",
                            S.STARTED)

    def write_words(self, addr, words, progress=None):
        """Write ``words`` (ints) from word address ``addr``, ``max_data`` bytes per frame."""
        info = self.info or self.get_info()
        wb, n = info.word_bytes, info.max_data // info.word_bytes
        for k in range(0, len(words), n):
            part = words[k:k + n]
            data = b"".join(int(w).to_bytes(wb, "little") for w in part)
            self.request(C.WRITE, hp.write_payload(addr + k, data))
            if progress:
                progress(len(part))

    def read_words(self, addr, count, progress=None):
        """``count`` words (ints) from word address ``addr``."""
        info = self.info or self.get_info()
        wb, n = info.word_bytes, info.max_data // info.word_bytes
        out = []
        for k in range(0, count, n):
            m = min(n, count - k)
            reply, _ = self.request(C.READ, hp.read_payload(addr + k, m), reply_bytes=m * wb)
            if len(reply.data) != m * wb:
                raise LinkError(f"READ of {m} words returned {len(reply.data)} bytes")
            out += [int.from_bytes(reply.data[i * wb:(i + 1) * wb], "little") for i in range(m)]
            if progress:
                progress(m)
        return out

    def read_csrs(self, first, count):
        """``count`` CSR values from address ``first``."""
        n = (self.info or self.get_info()).max_data // 4
        out = []
        for k in range(0, count, n):
            m = min(n, count - k)
            reply, _ = self.request(C.CSR, hp.csr_payload(first + k, m), reply_bytes=4 * m)
            if len(reply.data) != 4 * m:
                raise LinkError(f"CSR read of {m} registers returned {len(reply.data)} bytes")
            out += [int.from_bytes(reply.data[4 * i:4 * i + 4], "little") for i in range(m)]
        return out


@dataclass
class BoardResult(RTLResult):
    """What a board run produced: :class:`~stepforge.sim.rtl.run.RTLResult` (``status``,
    ``tensors``, ``outputs``, ``csrs``, ``hw``, ``timings``; here ``load``, ``run``, ``read`` and
    ``wall`` seconds, and the same ``cycles`` and tensor byte counts) with the board's ``info``
    and the link's ``stats``."""
    info: object = None
    stats: object = None


def check_board(link, hw):
    """The board's ``INFO``, after checking it runs ``hw``'s design (else :class:`LinkError`)."""
    info = link.get_info()
    if info.version != hp.VERSION:
        raise LinkError(f"the board speaks host protocol version {info.version}, this driver "
                        f"{hp.VERSION}: build and flash the board with this stepforge")
    want = design_id(hw)
    if info.design_id != want or info.word_bytes != hw.geometry.word_bytes:
        raise LinkError(f"the board runs another design (id 0x{info.design_id:08x}, "
                        f"{info.word_bytes}-byte words; this program is 0x{want:08x}, "
                        f"{hw.geometry.word_bytes}-byte words): build and flash this program "
                        "for this board first")
    return info


def run_on_board(link, program, hw, csr_map, tensors, inputs, *, timeout=60.0, poll=0.05,
                 progress=None):
    """Load, start, wait, read back and decode a run of ``program`` (lowered to ``hw``).

    Parameters
    ----------
    link : HostLink
    csr_map : dict
        ``{name: address}`` of the design's CSRs (``System.csr_map``).
    timeout : float
        Seconds the run may take on the board.
    poll : float
        Seconds between ``STATUS`` requests.
    progress : callable, optional
        Called with a line of text as the run goes.

    Returns
    -------
    BoardResult
        ``status`` is ``"done"``, ``"error"``, ``"deadlock"`` or ``"timeout"``.
    """
    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    info = check_board(link, hw)
    link.reset()            # counters at zero, and a program that ran before may start again
    job = make_job(program, hw, tensors, inputs)
    wb = info.word_bytes
    total = job.load_words
    say(f"loading {total * wb} bytes over the host link at {info.baud} baud")
    t0 = time.perf_counter()
    loaded, last_say = [0], [t0]

    def loading(n):
        loaded[0] += n
        if time.perf_counter() - last_say[0] > 2.0:
            say(f"loaded {loaded[0] * wb} of {total * wb} bytes")
            last_say[0] = time.perf_counter()

    for base, words in job.preload:
        link.write_words(base, words, progress=loading)
    timings = {"load": time.perf_counter() - t0}

    t0 = time.perf_counter()
    link.start()
    say("started")
    state, last_say = link.status(), time.perf_counter()
    while state.state == "running":
        if time.perf_counter() - t0 > timeout:
            break
        if time.perf_counter() - last_say > 1.0:
            say(f"running: {state.cycles} cycles")
            last_say = time.perf_counter()
        time.sleep(poll)
        state = link.status()
    timings["run"] = time.perf_counter() - t0
    status = state.state if state.state != "running" else "timeout"

    t0 = time.perf_counter()
    names = sorted(csr_map, key=csr_map.get)
    lo, hi = min(csr_map.values()), max(csr_map.values())
    values = link.read_csrs(lo, hi - lo + 1)
    csrs = {n: values[csr_map[n] - lo] for n in names}
    tensors_out, streams_out = {}, {}
    if status == "done":
        say(f"reading back {job.read_words * wb} bytes")
        words = {key: link.read_words(base, n) for key, (base, n) in job.readback.items()}
        tensors_out, streams_out = decode(program, hw, words, csrs)
    timings["read"] = time.perf_counter() - t0
    timings["wall"] = time.perf_counter() - t_start
    return BoardResult(status, tensors_out, streams_out, csrs, hw, timings, info, link.stats)
