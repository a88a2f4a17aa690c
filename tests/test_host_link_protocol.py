"""The host link's frames (contract/host_protocol.py): encoding, decoding, every bad frame."""

import pytest

from stepforge.contract import host_protocol as hp


def test_crc_is_ccitt_false_and_the_residue_is_zero():
    assert hp.crc16(b"123456789") == 0x29B1
    frame = hp.encode(hp.Command.WRITE, 9, b"\x01\x02\x03")
    assert frame == bytes([0xA5, 0x02, 9, 3, 0]) + b"\x01\x02\x03" + \
        hp.crc16(bytes([0x02, 9, 3, 0, 1, 2, 3])).to_bytes(2, "big")
    assert hp.crc16(frame[1:]) == 0


def test_encode_decode_round_trip():
    for cmd, seq, payload in [(1, 0, b""), (2, 255, bytes(range(256)) * 2), (0x83, 7, b"\x00")]:
        frame = hp.decode(hp.encode(cmd, seq, payload))
        assert (frame.cmd, frame.seq, frame.payload) == (cmd, seq, payload)
    r = hp.decode(hp.reply(hp.Command.READ, 4, hp.Status.OK, b"\xAA\xBB"))
    assert r.is_reply and r.command == hp.Command.READ and r.status == hp.Status.OK
    assert r.data == b"\xAA\xBB"


def test_parse_skips_garbage_and_waits_for_a_whole_frame():
    frame = hp.encode(hp.Command.STATUS, 3)
    assert hp.parse(b"\x00\x11" + frame[:4]) == (None, 2)
    assert hp.parse(b"\x00\x11") == (None, 2)
    f, used = hp.parse(b"\x00\x11" + frame + b"\xA5")
    assert f == hp.Frame(hp.Command.STATUS, 3) and used == 2 + len(frame)


@pytest.mark.parametrize("index", range(1, 7))
def test_every_single_bit_error_is_detected(index):
    frame = hp.encode(hp.Command.WRITE, 1, b"\x10")
    for bit in range(8):
        bad = bytearray(frame)
        bad[index] ^= 1 << bit
        try:
            f, used = hp.parse(bytes(bad))
        except hp.ProtocolError as exc:
            assert "CRC mismatch" in str(exc)
            assert exc.used == len(frame) or index == 3   # a shorter length: an earlier end
        else:   # a flipped length bit makes the frame longer than the bytes: not whole yet
            assert f is None and index in (3, 4)


def test_decode_refuses_what_is_not_exactly_one_frame():
    frame = hp.encode(1, 1)
    for bad in (frame[:-1], frame + b"\x00", b"\x00" + frame):
        with pytest.raises(hp.ProtocolError, match="bytes are not exactly one frame"):
            hp.decode(bad)
    with pytest.raises(hp.ProtocolError, match="has no status byte"):
        hp.decode(hp.encode(0x81, 1)).status
    with pytest.raises(hp.ProtocolError, match="unknown status 99"):
        hp.decode(hp.encode(0x81, 1, b"\x63")).status
    with pytest.raises(ValueError, match="frame cmd and seq must be bytes, not 256, 0"):
        hp.encode(256, 0)


def test_info_and_status_records():
    info = hp.Info(1, 2, 15, 512, 0xCAFEF00D, 12_000_000, 3_000_000)
    assert len(info.pack()) == hp.INFO_BYTES == 20
    back = hp.Info.unpack(info.pack())
    assert repr(back) == repr(info)
    st = hp.RunStatus(hp.Flags.DONE | hp.Flags.STARTED, 0, 0, 1234)
    assert hp.RunStatus.unpack(st.pack()).cycles == 1234
    assert st.state == "done"
    assert hp.RunStatus(hp.Flags.STARTED, 0, 0, 0).state == "running"
    assert hp.RunStatus(hp.Flags.ERROR | hp.Flags.STARTED, 3, 2, 9).state == "error"
    with pytest.raises(hp.ProtocolError, match="STATUS data must be 13 bytes, not 3"):
        hp.RunStatus.unpack(b"abc")
    assert hp.read_payload(0x01020304, 5) == b"\x04\x03\x02\x01\x05\x00"
    assert hp.csr_payload(3, 2) == b"\x03\x00\x02\x00"
    assert hp.write_payload(1, b"\xAA") == b"\x01\x00\x00\x00\xAA"
