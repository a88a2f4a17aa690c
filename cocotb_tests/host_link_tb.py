"""The serial line of ``--port sim``: a pseudo-terminal bit-banged into a Verilated HostLinkTop.

The toplevel is a :class:`~stepforge.hdl.host_link.HostLinkTop` in its simulation shell
(:mod:`stepforge.sim.rtl.shell`). The testbench opens a pseudo-terminal pair, writes the slave's
path to the job's ``pty`` file and then serves the line: bytes the host writes to the slave are
sent into ``uart_rx`` bit by bit (start bit, 8 data bits LSB first, stop bit, each
``clocks_per_bit`` cycles, back to back), and ``uart_tx`` is sampled in the middle of each bit
and every good byte written back to the host. The host is a real process with a real serial
port (pyserial on the slave), so the driver's code is the one that runs against a board.

Time. While a request is on the line or its reply is owed, and while the program runs, the
simulation advances; when the design is idle and the host sends nothing, the testbench waits
for the host without advancing time, so the host's own latency costs no simulated time and the
measured throughput is the link's. Each request-reply exchange is logged (command, bytes each
way, simulated nanoseconds from the request's first start bit to the reply's last stop bit) in
the job's ``stats`` file, written when the host creates the job's ``stop`` file. Job (JSON, path
in ``STEPFORGE_HOSTLINK``)::

    {"pty": path, "stop": path, "stats": path, "period_ns": int, "clocks_per_bit": int,
     "quiet_cycles": int,           # the bridge's timeout: a reply is owed at most this late
     "run_chunk_cycles": int}       # cycles simulated per wake-up while the program runs
"""

import errno
import json
import os
import select
import time
import tty

import cocotb
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time

from ..contract import host_protocol as hp

JOB_ENV = "STEPFORGE_HOSTLINK"
#: Seconds without a byte from the host, the design idle, after which the testbench ends (it
#: also ends when the process that started it is gone).
IDLE_LIMIT = 900.0


class Line:
    """Both ends of the pseudo-terminal and the bookkeeping of requests and replies."""

    def __init__(self, master):
        self.master = master
        self.out = bytearray()          # bytes for the host not yet written to the pty
        self.host = bytearray()         # bytes from the host, parsed for the log
        self.reply = bytearray()        # bytes from the design, parsed for the log
        self.owed = False               # a request went out and its reply has not come
        self.t_request = None
        self.request = None
        self.tx_active = False
        self.last_activity = 0
        self.exchanges = []

    def to_host(self, byte):
        self.out.append(byte)
        self.flush()

    def flush(self):
        while self.out:
            try:
                n = os.write(self.master, bytes(self.out))
            except BlockingIOError:
                return
            del self.out[:n]

    def from_host(self):
        try:
            return os.read(self.master, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno == errno.EIO:      # no slave open: nothing to read
                return b""
            raise

    def sent(self, data, t_ns):
        if not self.owed:
            self.t_request = t_ns
        self.owed = True
        self.host += data
        try:
            frame, used = hp.parse(self.host)
        except hp.ProtocolError as exc:
            frame, used = None, exc.used
        del self.host[:used]
        if frame is not None:
            self.request = frame

    def received(self, byte, t_ns):
        self.reply.append(byte)
        try:
            frame, used = hp.parse(self.reply)
        except hp.ProtocolError as exc:
            frame, used = None, exc.used
            self.owed = False
        del self.reply[:used]
        if frame is not None:
            req = self.request
            self.exchanges.append({
                "cmd": frame.command, "status": frame.payload[0] if frame.payload else None,
                "request_payload": len(req.payload) if req is not None else None,
                "reply_payload": len(frame.payload), "ns": t_ns - (self.t_request or t_ns)})
            self.owed = False
            self.request = None
            self.host.clear()


@cocotb.test()
async def serve(dut):
    """Serve the pseudo-terminal until the host creates the stop file."""
    with open(os.environ[JOB_ENV]) as f:
        job = json.load(f)
    period = job["period_ns"]
    bit_ns = period * job["clocks_per_bit"]
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    line = Line(master)
    tmp = job["pty"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(os.ttyname(slave))
    os.replace(tmp, job["pty"])

    dut.uart_rx.value = 1
    dut.rst.value = 1
    await Timer(10 * period, unit="ns")
    dut.rst.value = 0
    await Timer(10 * period, unit="ns")

    async def sample():
        while True:
            await FallingEdge(dut.uart_tx)
            line.tx_active = True
            await Timer(bit_ns // 2, unit="ns")
            if int(dut.uart_tx.value):
                line.tx_active = False
                continue                    # a glitch
            value = 0
            for i in range(8):
                await Timer(bit_ns, unit="ns")
                value |= int(dut.uart_tx.value) << i
            await Timer(bit_ns, unit="ns")
            stop = int(dut.uart_tx.value)
            line.tx_active = False
            line.last_activity = get_sim_time("ns")
            if stop:
                line.to_host(value)
                line.received(value, get_sim_time("ns") + bit_ns // 2)

    cocotb.start_soon(sample())
    quiet_ns = job["quiet_cycles"] * period
    chunk_ns = job["run_chunk_cycles"] * period
    last_host = time.monotonic()
    parent = os.getppid()
    while not os.path.exists(job["stop"]) and os.getppid() == parent:
        line.flush()
        data = line.from_host()
        if data:
            last_host = time.monotonic()
            await FallingEdge(dut.clk)
            line.sent(data, get_sim_time("ns"))
            bits = [b for byte in data for b in [0] + [byte >> i & 1 for i in range(8)] + [1]]
            k = 0
            while k < len(bits):            # one wake-up per run of equal bits
                n = 1
                while k + n < len(bits) and bits[k + n] == bits[k]:
                    n += 1
                dut.uart_rx.value = bits[k]
                await Timer(n * bit_ns, unit="ns")
                k += n
            line.last_activity = get_sim_time("ns")
            continue
        now = get_sim_time("ns")
        if line.owed and now - line.last_activity > 4 * quiet_ns + 20 * bit_ns:
            line.owed = False               # nothing the design will answer (no SYNC went in)
        if line.owed or line.tx_active or line.out:
            await Timer(10 * bit_ns, unit="ns")
        elif int(dut.leds.value) & 1:
            await Timer(chunk_ns, unit="ns")
        else:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready and time.monotonic() - last_host > IDLE_LIMIT:
                break
    with open(job["stats"], "w") as f:
        json.dump({"exchanges": line.exchanges, "bit_ns": bit_ns,
                   "sim_ns": get_sim_time("ns")}, f)
    os.close(slave)
    os.close(master)
