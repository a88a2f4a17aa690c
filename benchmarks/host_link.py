"""The UART host link's figures: its throughput against the line rate, and its cost on an FPGA.

1. **Throughput at the bit level.** A small elementwise program's board design (HostLinkTop,
   iCEBreaker configuration) runs in Verilator behind the simulated serial line
   (:class:`~stepforge.boards.host.sim_port.SimBoard`); whole-frame WRITEs and READs of
   ``max_data`` bytes are timed in simulated time from the request's first start bit to the
   reply's last stop bit, and the data bytes' own time on the line is divided by it.
2. **Cost.** The link alone (UART receiver and transmitter, bridge) around a
   256-word stand-in memory, synthesized, placed and routed for the UP5K and the ECP5-85F
   (one seed each): LUTs, flip-flops, block RAMs, Fmax.

Usage: ``python benchmarks/host_link.py [--no-fpga]``.
"""

import argparse
import random
import sys
import tempfile
from pathlib import Path

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from stepforge.boards import build
from stepforge.boards.host import SimBoard, line_rate
from stepforge.contract import host_protocol as hp
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.host_link import HostBridge, UartRx, UartTx, baud_divisor
from stepforge.hdl.memory import MemoryGeometry
from stepforge.loader import load
from stepforge.sim.rtl import verilator

ROOT = Path(__file__).resolve().parent.parent


def throughput(frames=4):
    """``{"WRITE": ratio, "READ": ratio}`` of the line rate, over ``frames`` full frames each."""
    pf = load(ROOT / "examples" / "elementwise.py")
    sim = SimBoard(pf.build(M=8, N=8), HardwareConfig.ice40_up5k())
    link = sim.link()
    rng = random.Random(0)
    n = hp.MAX_DATA // sim.hw.geometry.word_bytes
    try:
        for _ in range(frames):
            words = [rng.randrange(1 << 16) for _ in range(n)]
            link.write_words(0, words)
            assert link.read_words(0, n) == words
    finally:
        stats = sim.close()
    out = {name: ratio for name, (_, ratio) in line_rate(stats).items()}
    return out, sim.baud, sim.clocks_per_bit


class LinkOnly(wiring.Component):
    """The host link around a 256-word stand-in memory (latency 2) and a cycle counter."""

    uart_rx: In(1, init=1)
    uart_tx: Out(1, init=1)
    leds: Out(4)

    def __init__(self, clock_hz, baud):
        self.divisor = baud_divisor(clock_hz, baud)
        self.clock_hz, self.baud = clock_hz, baud
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        g = MemoryGeometry(word_bytes=2, channels=1, bytes_per_channel=2, latency=2,
                           size_words=256)
        m.submodules.rx = rx = UartRx(self.divisor)
        m.submodules.tx = tx = UartTx(self.divisor)
        m.submodules.bridge = br = HostBridge(g, status_csrs=(1, 2, 3), timeout=self.clock_hz // 50,
                                              clock_hz=self.clock_hz, baud=self.baud)
        m.submodules.mem = mem = memory.Memory(shape=16, depth=256, init=[])
        w, r = mem.write_port(), mem.read_port()
        valid = Signal(2)
        cycles = Signal(32)
        csr = Signal(32)
        m.d.sync += [cycles.eq(cycles + 1), valid.eq(valid << 1 | br.debug.re),
                     csr.eq(cycles + br.csr_addr)]
        m.d.comb += [
            rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx),
            br.rx_error.eq(rx.framing_error | rx.overrun),
            w.addr.eq(br.debug.addr), w.data.eq(br.debug.wdata), w.en.eq(br.debug.we),
            r.addr.eq(br.debug.addr), br.debug.rdata.eq(r.data), br.debug.rvalid.eq(valid[1]),
            br.csr_rdata.eq(csr), br.running.eq(cycles[31]),
            self.leds.eq(br.start | br.busy << 1),
        ]
        wiring.connect(m, rx.o, br.rx)
        wiring.connect(m, br.tx, tx.i)
        return m


def cost(device, clock_hz, baud, out_dir):
    """The BuildReport of the link alone on ``device``."""
    text = verilator.convert(LinkOnly(clock_hz, baud), "top")
    path = Path(out_dir) / "top.v"
    path.write_text(text)
    return build(path, device, out_dir=out_dir, seeds=1, jobs=1, freq_mhz=clock_hz / 1e6,
                 progress=None, pack=False, name="host_link")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-fpga", action="store_true", help="skip the FPGA builds")
    args = parser.parse_args(argv)
    ratios, baud, cpb = throughput()
    print(f"host link throughput (Verilated HostLinkTop, {cpb} cycles a bit, {baud} baud, "
          f"{hp.MAX_DATA}-byte frames): " + ", ".join(f"{k} {v:.1%}" for k, v in ratios.items())
          + " of the line rate")
    if args.no_fpga:
        return 0
    for device, clock, baud in (("up5k", 12_000_000, 1_000_000),
                                ("ecp5-85f", 50_000_000, 3_000_000)):
        with tempfile.TemporaryDirectory() as tmp:
            report = cost(device, clock, baud, tmp)
        print(f"\n{device} at {clock / 1e6:g} MHz, {baud} baud:")
        print(report.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
