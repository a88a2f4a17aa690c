"""The host driver's requests, retries and refusals against the bridge model (no simulator).

``ModelPort`` is a serial port whose far end is tests/host_link_model.py's bridge: each whole
frame written is answered at once, so the driver's logic is tested in milliseconds; the same
driver against the Verilated design is tests/test_host_link_sim.py.
"""

import pytest

from stepforge.boards.host.driver import HostLink, LinkError
from stepforge.boards.host.job import coalesce
from stepforge.cli import main
from stepforge.contract import host_protocol as hp

from .host_link_model import BridgeModel

C, S = hp.Command, hp.Status
INFO = hp.Info(hp.VERSION, 2, 8, 16, 0xABCD, 12_000_000, 3_000_000)


class ModelPort:
    """pyserial's surface over a :class:`BridgeModel`; ``mangle(n, frame)`` may change the
    n-th frame written (counted from 1) and ``mangle_reply(n, reply)`` its reply."""

    def __init__(self, model, mangle=None, mangle_reply=None):
        self.model, self.mangle, self.mangle_reply = model, mangle, mangle_reply
        self.rx = bytearray()
        self.n = 0
        self.in_waiting = 0

    def write(self, data):
        self.n += 1
        data = self.mangle(self.n, bytes(data)) if self.mangle else bytes(data)
        reply = self.model.feed(data) if data else b""
        if self.mangle_reply:
            reply = self.mangle_reply(self.n, reply)
        self.rx += reply
        self.in_waiting = len(self.rx)

    def read(self, n):
        out = bytes(self.rx[:n])
        del self.rx[:n]
        self.in_waiting = len(self.rx)
        return out

    def flush(self):
        pass

    def reset_input_buffer(self):
        self.rx.clear()
        self.in_waiting = 0


def link(mangle=None, mangle_reply=None, **kw):
    model = BridgeModel(word_bytes=2, size_words=64, max_data=16, csrs=[1, 2, 3, 4, 5],
                        status_csrs=(1, 2, 3), info=INFO, **kw)
    return HostLink(ModelPort(model, mangle, mangle_reply), 3_000_000, retries=2,
                    timeout=0.01, byte_seconds=0), model


def test_words_are_cut_into_frames_and_read_back():
    h, model = link()
    assert repr(h.get_info()) == repr(INFO)
    words = list(range(100, 120))
    h.write_words(3, words)
    assert [model.word(3 + k) for k in range(20)] == words
    assert h.read_words(3, 20) == words
    assert h.port.n == 1 + 3 + 3              # 8 words (16 bytes) per frame
    assert h.read_csrs(0, 6) == [1, 2, 3, 4, 5, 0]
    assert h.stats.retries == 0


def test_corrupted_requests_and_replies_are_retried():
    def flip_second(n, frame):
        return frame[:6] + bytes([frame[6] ^ 4]) + frame[7:] if n == 2 else frame

    def cut_reply(n, reply):
        return reply[:-1] if n == 4 else reply

    h, model = link(flip_second, cut_reply)
    h.get_info()
    h.write_words(0, [7, 8])                    # frame 2 corrupted: CRC, frame 3 retries
    assert h.read_words(0, 2) == [7, 8]         # frame 4's reply cut: no reply, frame 5
    assert h.stats.retries == 2
    assert h.stats.errors[0] == "the board answered CRC to WRITE"


def test_stray_replies_are_ignored():
    def stray(n, reply):
        return hp.reply(C.READ, 0x77, S.OK, b"\x01\x02") + reply

    h, _ = link(mangle_reply=stray)
    h.write_words(0, [5])
    assert h.read_words(0, 1) == [5]
    assert h.stats.retries == 0 and "stray reply" in h.stats.errors[0]


def test_a_link_that_never_works_raises():
    h, _ = link(mangle=lambda n, frame: frame[:-1] + bytes([frame[-1] ^ 1]))
    with pytest.raises(LinkError, match="the board answered CRC to STATUS; gave up after 3 "
                                        "attempts"):
        h.status()
    h, _ = link(mangle=lambda n, frame: b"")
    with pytest.raises(LinkError, match=r"no valid reply to STATUS \(seq 3\); gave up after 3"):
        h.status()


def test_refusals_are_errors_not_retries():
    h, model = link(running=True)
    with pytest.raises(LinkError, match="the board refused WRITE: BUSY") as exc:
        h.write_words(0, [1])
    assert exc.value.status == S.BUSY and h.stats.retries == 0
    h, model = link()
    h.start()
    assert model.starts == 1
    with pytest.raises(LinkError, match=r"the board's program was started before this run "
                                        r"\(RESET it first\)"):
        h.start()
    h.reset()
    h.start()
    assert model.starts == 2 and model.resets == 1


def test_a_start_whose_reply_is_lost_is_not_repeated():
    h, model = link(mangle_reply=lambda n, reply: b"" if n == 1 else reply)
    h.start()                                   # no reply, retried: STARTED is the first's
    assert model.starts == 1 and h.stats.retries == 1


def test_preload_regions_coalesce_with_zeros():
    assert coalesce([[10, [1, 2]], [0, [5, 6]], [13, [7]], [200, [9]]], max_gap=64) == [
        [0, [5, 6] + [0] * 8 + [1, 2, 0, 7]], [200, [9]]]
    assert coalesce([[0, [1]], [10, [2]]], max_gap=8) == [[0, [1]], [10, [2]]]


def test_no_board_on_the_port_is_a_clear_error(capsys):
    code = main(["run", "examples/elementwise.py", "-p", "M=8", "-p", "N=8", "--board",
                 "icebreaker", "--port", "/dev/stepforge-no-such-port"])
    out = capsys.readouterr()
    assert code == 1
    assert "error: cannot open the serial port '/dev/stepforge-no-such-port'" in out.out
    assert "the dialout group" in out.out
    assert main(["run", "examples/elementwise.py", "--board", "icebreaker"]) == 2
    assert "--board needs --port" in capsys.readouterr().err
    assert main(["run", "examples/elementwise.py", "--board", "nexys", "--port", "sim"]) == 1
    assert "error: board must be one of icebreaker, " in capsys.readouterr().out
