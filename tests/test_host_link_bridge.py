# amaranth: UnusedElaboratable=no
"""HostBridge in Amaranth's simulator against the bridge model (tests/host_link_model.py).

Every command, and every kind of bad frame: each bad frame is answered with its error and
leaves the memory, the CSRs and ``start`` untouched.
"""

import gc
import random
import warnings

import pytest
from amaranth.sim import Simulator

from stepforge.compiler.lower import lower
from stepforge.contract import host_protocol as hp
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.host_link import HostBridge, HostLinkTop, design_id
from stepforge.hdl.host_link.bridge import CRC_PRESET
from stepforge.hdl.memory import MemoryGeometry
from stepforge.hdl.system import System
from stepforge.loader import load

from .host_link_model import BridgeModel

C, S = hp.Command, hp.Status
WB, SIZE, MAX_DATA, TIMEOUT, LATENCY = 2, 40, 16, 30, 4
CSRS = [0x11, 123456, 7, 3, 0xDEADBEEF, 42]
STATUS_CSRS = (1, 2, 3)


def make_bridge():
    g = MemoryGeometry(word_bytes=WB, channels=1, bytes_per_channel=WB, latency=LATENCY,
                       size_words=SIZE)
    return HostBridge(g, status_csrs=STATUS_CSRS, timeout=TIMEOUT, design_id=0x1234ABCD,
                      clock_hz=12_000_000, baud=3_000_000, max_data=MAX_DATA)


def exchange(frames, *, running=False, seed=0, lose=None):
    """Send each of ``frames`` (bytes) into a fresh bridge and collect one reply per frame.

    Bytes go in with random gaps; the reply is taken with random ``ready``. ``lose`` is the
    index of a frame during which ``rx_error`` pulses once. Returns ``(replies, memory,
    start pulses)``.
    """
    dut = make_bridge()
    rng = random.Random(seed)
    mem, replies, starts, resets = {}, [], [0], [0]
    pipe = [None] * LATENCY

    async def memory_and_csrs(ctx):
        async for _, _, we, re, addr, wdata, csr_addr, start, reset in ctx.tick().sample(
                dut.debug.we, dut.debug.re, dut.debug.addr, dut.debug.wdata, dut.csr_addr,
                dut.start, dut.system_reset):
            if we:
                mem[addr] = wdata
            pipe.append(mem.get(addr, 0) if re else None)
            out = pipe.pop(0)
            ctx.set(dut.debug.rvalid, out is not None)
            ctx.set(dut.debug.rdata, out or 0)
            ctx.set(dut.csr_rdata, CSRS[csr_addr] if csr_addr < len(CSRS) else 0)
            starts[0] += start
            resets[0] += reset

    async def host(ctx):
        ctx.set(dut.running, running)
        for n, frame in enumerate(frames):
            lose_at = rng.randrange(len(frame)) if lose == n else None
            for k, byte in enumerate(frame):
                while rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(dut.rx.valid, 1)
                ctx.set(dut.rx.payload, byte)
                ctx.set(dut.rx_error, k == lose_at)
                while True:
                    ready = ctx.get(dut.rx.ready)
                    await ctx.tick()
                    if ready:
                        break
                ctx.set(dut.rx_error, 0)
                ctx.set(dut.rx.valid, 0)
            got = bytearray()
            for _ in range(2000 + 40 * len(frame)):
                ready = rng.random() < 0.7
                ctx.set(dut.tx.ready, ready)
                take = ready and ctx.get(dut.tx.valid)
                byte = ctx.get(dut.tx.payload)
                await ctx.tick()
                if take:
                    got.append(byte)
                    reply, used = hp.parse(got)
                    if reply is not None:
                        assert used == len(got), "bytes after the reply"
                        break
            else:
                raise AssertionError(f"no reply to frame {n} ({bytes(got).hex()})")
            ctx.set(dut.tx.ready, 0)
            for _ in range(3):
                await ctx.tick()
                assert not ctx.get(dut.tx.valid), "more bytes after the reply"
            replies.append(bytes(got))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory_and_csrs)
    sim.add_testbench(host)
    sim.run()
    return replies, mem, starts[0], resets[0]


def model(**kw):
    return BridgeModel(word_bytes=WB, size_words=SIZE, max_data=MAX_DATA, csrs=CSRS,
                       status_csrs=STATUS_CSRS, info=make_bridge().info, **kw)


def check(frames, **kw):
    """Run ``frames`` through the bridge and the model; their replies and memory must agree."""
    ref = model(running=kw.get("running", False))
    replies, mem, starts, resets = exchange(frames, **kw)
    want = [ref.feed(f, lost=kw.get("lose") == i) for i, f in enumerate(frames)]
    for i, (got, exp) in enumerate(zip(replies, want)):
        assert got == exp, f"frame {i}: {hp.decode(got)} != {hp.decode(exp)}"
    assert {a: w for a, w in mem.items()} == ref.mem
    assert starts == ref.starts and resets == ref.resets
    return [hp.decode(r) for r in replies]


def words(*values):
    return b"".join(v.to_bytes(WB, "little") for v in values)


def test_write_read_info_csr_start_status():
    rng = random.Random(1)
    data = [rng.randrange(1 << 16) for _ in range(8)]
    frames = [
        hp.encode(C.INFO, 1),
        hp.encode(C.WRITE, 2, hp.write_payload(5, words(*data))),          # a full buffer
        hp.encode(C.WRITE, 3, hp.write_payload(SIZE - 1, words(0xBEEF))),  # the last word
        hp.encode(C.READ, 4, hp.read_payload(4, 8)),
        hp.encode(C.READ, 5, hp.read_payload(SIZE - 2, 2)),
        hp.encode(C.CSR, 6, hp.csr_payload(0, 4)),
        hp.encode(C.CSR, 7, hp.csr_payload(4, 4)),                          # past the last CSR
        hp.encode(C.STATUS, 8),
        hp.encode(C.START, 9),
        hp.encode(C.START, 10),
        hp.encode(C.STATUS, 11),
        hp.encode(C.RESET, 12),
        hp.encode(C.START, 13),
    ]
    replies = check(frames)
    assert [r.status for r in replies] == [S.OK] * 9 + [S.STARTED] + [S.OK] * 3
    assert [r.seq for r in replies] == list(range(1, 14))
    assert hp.Info.unpack(replies[0].data).design_id == 0x1234ABCD
    assert replies[3].data == words(0, *data[:7])
    assert hp.RunStatus.unpack(replies[10].data).flags == hp.Flags.STARTED
    assert hp.RunStatus.unpack(replies[10].data).cycles == CSRS[1]


def corrupt(frame, index, bit=0):
    out = bytearray(frame)
    out[index] ^= 1 << bit
    return bytes(out)


def test_bad_frames_change_nothing():
    good = hp.encode(C.WRITE, 1, hp.write_payload(0, words(1, 2, 3)))
    frames = [
        corrupt(good, 7, 3),                                           # CRC (a data bit)
        corrupt(good, len(good) - 1),                                  # CRC (the CRC itself)
        corrupt(hp.encode(C.START, 2), 1, 6),                          # CRC (the command)
        hp.encode(0x33, 3),                                            # unknown command
        hp.encode(C.WRITE, 4, hp.write_payload(0, words(1) + b"\x01")),  # not whole words
        hp.encode(C.WRITE, 5, hp.write_payload(0, b"")),               # no words
        hp.encode(C.READ, 6, hp.read_payload(0, 1) + b"\x00"),         # READ length
        hp.encode(C.START, 7, b"\x00"),                                # START with a payload
        hp.encode(C.INFO, 8, b"\x01"),
        hp.encode(C.STATUS, 9, b"\x01\x02"),
        hp.encode(C.RESET, 9, b"\x00"),
        hp.encode(C.CSR, 10, b"\x00\x00\x01"),
        hp.encode(C.WRITE, 11, hp.write_payload(0, words(*range(9)))),  # more than max_data
        hp.encode(C.READ, 12, hp.read_payload(0, 0)),                  # count 0
        hp.encode(C.READ, 13, hp.read_payload(0, MAX_DATA // WB + 1)),  # too many words
        hp.encode(C.READ, 14, hp.read_payload(SIZE - 1, 2)),           # past the end
        hp.encode(C.WRITE, 15, hp.write_payload(SIZE - 1, words(1, 2))),  # past the end
        hp.encode(C.WRITE, 16, hp.write_payload(1 << 31, words(1))),   # far past the end
        hp.encode(C.CSR, 17, hp.csr_payload(0, 0)),
        hp.encode(C.READ, 18, hp.read_payload(0, 2)),                  # still zeros
    ]
    replies = check(frames)
    assert [r.status for r in replies] == (
        [S.CRC] * 3 + [S.COMMAND] + [S.LENGTH] * 8 + [S.LENGTH] + [S.RANGE] * 6 + [S.OK])
    assert replies[-1].data == words(0, 0)


def test_overlong_length_is_drained_then_answered():
    """LEN past the buffer: the rest of the frame is discarded (0xA5 bytes in it start no
    frame), then the error, then the next frame is taken normally."""
    payload = bytes([hp.SYNC]) * 30
    frames = [hp.encode(C.WRITE, 1, payload), hp.encode(C.READ, 2, hp.read_payload(0, 1))]
    replies = check(frames)
    assert [r.status for r in replies] == [S.LENGTH, S.OK]


def test_cut_frames_time_out_and_garbage_is_skipped():
    write = hp.encode(C.WRITE, 3, hp.write_payload(2, words(7, 8)))
    frames = [
        hp.encode(C.WRITE, 1, hp.write_payload(0, words(1, 2)))[:-3],   # a byte short of CRC
        hp.encode(C.READ, 2, hp.read_payload(0, 1))[:3],                  # cut in the header
        b"\x00\x13\x37" + write,                                          # garbage before SYNC
        hp.encode(C.READ, 4, hp.read_payload(0, 4)),
    ]
    replies = check(frames)
    assert [r.status for r in replies] == [S.TIMEOUT, S.TIMEOUT, S.OK, S.OK]
    assert replies[3].data == words(0, 0, 7, 8)


def test_a_lost_byte_is_a_framing_error():
    frames = [hp.encode(C.WRITE, 1, hp.write_payload(0, words(5, 6))),
              hp.encode(C.READ, 2, hp.read_payload(0, 2))]
    replies = check(frames, lose=0, seed=3)
    assert [r.status for r in replies] == [S.FRAMING, S.OK]
    assert replies[1].data == words(0, 0)


def test_memory_is_refused_while_running():
    frames = [hp.encode(C.WRITE, 1, hp.write_payload(0, words(5))),
              hp.encode(C.READ, 2, hp.read_payload(0, 1)),
              hp.encode(C.CSR, 3, hp.csr_payload(1, 1)),
              hp.encode(C.STATUS, 4)]
    replies = check(frames, running=True)
    assert [r.status for r in replies] == [S.BUSY, S.BUSY, S.OK, S.OK]
    assert hp.RunStatus.unpack(replies[3].data).flags == hp.Flags.RUNNING


def test_constructor_checks():
    g = MemoryGeometry(word_bytes=4, channels=1, bytes_per_channel=4, latency=4, size_words=8)
    with pytest.raises(ValueError, match="HostBridge max_data must be a multiple of the word "
                                         "size 4 in 4..65527, not 6"):
        HostBridge(g, status_csrs=(1, 2, 3), timeout=10, max_data=6)
    with pytest.raises(ValueError, match="HostBridge timeout must be an int >= 1, not 0"):
        HostBridge(g, status_csrs=(1, 2, 3), timeout=0)


def test_host_link_top_ports_and_checks():
    # the lowered units are never built: the warnings said when they are collected are
    # silenced here, not in whichever test runs next
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = load("examples/elementwise.py").build(M=8, N=8)
        hw = lower(program, HardwareConfig.ice40_up5k())
        top = HostLinkTop(System(hw, target="board"), clock_hz=12_000_000, baud=1_000_000)
        assert sorted(top.signature.members) == ["leds", "uart_rx", "uart_tx"]
        assert (top.divisor, top.timeout, top.max_data) == (12, 240_000, 512)
        assert top.design_id == design_id(hw) == design_id(lower(program,
                                                                 HardwareConfig.ice40_up5k()))
        assert top.design_id != design_id(lower(program, HardwareConfig.ecp5_85f()))
        assert top.info.word_bytes == hw.geometry.word_bytes and top.info.baud == 1_000_000
        assert repr(top) == (f"HostLinkTop(System('elementwise', target='board'), "
                             f"clock_hz=12000000, baud=1000000, design_id={top.design_id}, "
                             f"timeout=240000, max_data=512)")
        with pytest.raises(ValueError, match="UART baud must be at most clock_hz / 4"):
            HostLinkTop(top.system, clock_hz=12_000_000, baud=6_000_000)
        del hw, top
        gc.collect()


def test_status_csrs_must_be_consecutive():
    g = MemoryGeometry(word_bytes=2, channels=1, bytes_per_channel=2, latency=4, size_words=8)
    with pytest.raises(ValueError, match=r"HostBridge status_csrs must be 3 consecutive CSR "
                                         r"addresses, not \(1, 3, 2\)"):
        HostBridge(g, status_csrs=(1, 3, 2), timeout=10)


def test_frames_cut_after_sync_or_cmd_echo_what_arrived():
    """A frame cut after SYNC answers command 0, seq 0; cut after CMD, that command, seq 0 (the
    command and seq registers start each frame at 0)."""
    frames = [hp.encode(C.READ, 9, hp.read_payload(0, 1))[:1],
              hp.encode(C.CSR, 9, hp.csr_payload(0, 1))[:2],
              hp.encode(C.STATUS, 10)]
    replies = check(frames)
    assert [(r.command, r.seq, r.status) for r in replies] == [
        (0, 0, S.TIMEOUT), (C.CSR, 0, S.TIMEOUT), (C.STATUS, 10, S.OK)]


def test_crc_preset_and_the_crc_sent_as_its_high_byte_twice():
    """The bridge's CRC register starts at CRC_PRESET so that SYNC takes it to the protocol's
    initial value, and after the step over the CRC's high byte the register's high byte is the
    CRC's low byte (so the reply's two CRC bytes are the high byte, twice)."""
    assert hp.crc16_update(CRC_PRESET, hp.SYNC) == hp.CRC_INIT
    rng = random.Random(5)
    for body in (b"", b"\x01\x02", bytes(rng.randrange(256) for _ in range(40))):
        c = hp.crc16(body)
        assert hp.crc16_update(c, c >> 8) >> 8 == c & 0xFF
        assert hp.crc16(body + bytes([c >> 8, c & 0xFF])) == 0


def test_word_size_must_be_a_power_of_two():
    g = MemoryGeometry(word_bytes=3, channels=1, bytes_per_channel=3, latency=4, size_words=8)
    with pytest.raises(ValueError, match="HostBridge needs a memory word of a power-of-two "
                                         "bytes, not 3"):
        HostBridge(g, status_csrs=(1, 2, 3), timeout=10, max_data=6)
