"""The host link without a board: driver -> simulated serial line -> Verilated HostLinkTop.

One build of a small elementwise program for the iCEBreaker's configuration (``SimBoard``: the
board's own design, bridge included, in Verilator behind a pseudo-terminal), then:

* a run through the driver, bit-exact against the interpreter, twice (``RESET`` in between:
  the same results and counters), and the host link's throughput
  measured at the bit level (simulated time per exchange against the line rate);
* the same run with a corrupted request, a dropped request byte and a dropped reply byte: each
  is retried and the results are still bit-exact; a link that corrupts every attempt raises
  instead of answering;
* ``stepforge run ... --board icebreaker --port sim`` (elementwise 8x8, and GEMV 256x256, issue 9's
  command).
"""

import random

import numpy as np
import pytest

from stepforge.boards.host import LinkError, SimBoard, line_rate, run_on_board
from stepforge.cli import main
from stepforge.contract import host_protocol as hp
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run

pytestmark = pytest.mark.slow

PARAMS = {"M": 8, "N": 8}


@pytest.fixture(scope="module")
def board():
    pf = load("examples/elementwise.py")
    program = pf.build(**PARAMS)
    data = pf.data(program)
    sim = SimBoard(program, HardwareConfig.ice40_up5k())
    yield sim, program, data["tensors"]
    sim.close()


def expected(sim, tensors):
    return run(sim.hw.program, tensors=tensors).tensors["Y"]


class FaultyPort:
    """A serial port that corrupts or loses bytes.

    ``faults``: ``(kind, command)`` pairs, each applied once, to the first frame of that command:
    ``"flip"`` flips a bit of the frame's 6th byte (``LEN`` or payload), ``"drop"`` loses the
    frame's 5th byte, ``"drop_reply"`` loses the 4th byte of the reply. ``flip_all``: every
    frame of this command is corrupted.
    """

    def __init__(self, port, faults=()):
        self.port = port
        self.pending = list(faults)
        self.flip_all = None
        self.reply_skip = None     # received bytes to let through before dropping one
        self.done = []

    def write(self, data):
        data = bytearray(data)
        for fault in list(self.pending):
            kind, cmd = fault
            if data[1] != cmd:
                continue
            self.pending.remove(fault)
            self.done.append(kind)
            if kind == "flip":
                data[5] ^= 0x10
            elif kind == "drop":
                del data[4]
            else:
                self.reply_skip = 3
        if self.flip_all is not None and data[1] == self.flip_all:
            data[5] ^= 0x01
        return self.port.write(bytes(data))

    def read(self, n):
        data = self.port.read(n)
        if self.reply_skip is not None and data:
            if len(data) > self.reply_skip:
                data = data[:self.reply_skip] + data[self.reply_skip + 1:]
                self.reply_skip = None
            else:
                self.reply_skip -= len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.port, name)


def test_run_bit_exact_and_throughput(board):
    sim, program, tensors = board
    link = sim.link()
    try:
        res = run_on_board(link, program, sim.hw, sim.csr_map, tensors, {})
        assert res.status == "done"
        assert res.info.clock_hz == 12_000_000 and res.info.baud == 3_000_000
        assert res.csrs["cycles"] > 0 and res.csrs["bytes_written"] == 128
        np.testing.assert_array_equal(res.tensors["Y"], expected(sim, tensors))
        assert link.stats.retries == 0
        # again, on the same design: RESET makes a board run any number of times
        again = run_on_board(link, program, sim.hw, sim.csr_map, tensors, {})
        np.testing.assert_array_equal(again.tensors["Y"], expected(sim, tensors))
        assert again.csrs == res.csrs
        # bulk: whole frames of words, written then read back
        rng = random.Random(0)
        n = hp.MAX_DATA // sim.hw.geometry.word_bytes
        assert sim.hw.geometry.size_words >= n
        for _ in range(3):
            words = [rng.randrange(1 << 16) for _ in range(n)]
            link.write_words(0, words)
            assert link.read_words(0, n) == words
    finally:
        stats = sim.close()
    rates = line_rate(stats, payload=512)
    assert {name: frames for name, (frames, _) in rates.items()} == {"WRITE": 3, "READ": 3}
    ratios = {name: ratio for name, (_, ratio) in rates.items()}
    print(f"host link throughput at the bit level: {ratios}")
    assert all(r >= 0.9 for r in ratios.values()), ratios


def test_faults_are_retried_and_never_give_a_wrong_answer(board):
    sim, program, tensors = board
    C = hp.Command
    port = FaultyPort(sim.open(), [("flip", C.WRITE), ("drop", C.START), ("drop_reply", C.READ)])
    link = sim.link(port=port)
    try:
        res = run_on_board(link, program, sim.hw, sim.csr_map, tensors, {})
        np.testing.assert_array_equal(res.tensors["Y"], expected(sim, tensors))
        assert port.done == ["flip", "drop", "drop_reply"]
        assert link.stats.retries == 3, link.stats.errors
        # the START that lost its LEN_HI byte reads as too long (LENGTH) or cut (TIMEOUT)
        answered = [e for e in link.stats.errors if "answered" in e]
        assert answered[0] == "the board answered CRC to WRITE"
        assert answered[1] in ("the board answered LENGTH to START",
                               "the board answered TIMEOUT to START")
        # a link that corrupts every READ: an error, not an answer
        port.flip_all = C.READ
        with pytest.raises(LinkError, match="the board answered CRC to READ; gave up after 3 "
                                            "attempts"):
            link.retries = 2
            link.read_words(0, 4)
    finally:
        sim.close()


def test_cli_run_on_the_simulated_board(capsys):
    # with the smaller hardware tile that fits elementwise's default size on the iCEBreaker
    # (docs/boards.md): the run takes the build's --tile (123 cycles on the preset's 2x2)
    code = main(["run", "examples/elementwise.py", "-p", "M=8", "-p", "N=8",
                 "--board", "icebreaker", "--tile", "1x2", "--port", "sim"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "elementwise: done after 145 cycles on icebreaker" in out
    assert "at the board's 12 MHz" in out and "run as 1x2 hardware tiles" in out
    assert "hardware vs interpreter: bit-exact" in out and out.rstrip().endswith("PASS")


def test_cli_runs_gemv_on_the_simulated_icebreaker(capsys):
    # issue 9's command: GEMV 256x256 in the iCEBreaker's own design (the build that fits the
    # UP5K beside its host link), loaded, run and read back through the link
    code = main(["run", "examples/gemv.py", "--board", "icebreaker", "--port", "sim"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "gemv: done after 16681 cycles on icebreaker" in out
    assert "hardware vs interpreter: bit-exact" in out and ", 0 retried" in out
    assert out.rstrip().endswith("PASS")
