"""A Python model of the host link bridge: what each whole frame does and what it answers.

The reference for :class:`~stepforge.hdl.host_link.HostBridge` in its tests
(``tests/test_host_link_bridge.py``); it follows ``contract/host_protocol.py``'s module doc.
"""

from stepforge.contract import host_protocol as hp


class BridgeModel:
    """Memory words, CSRs and the started flag of a System behind a bridge.

    ``feed(frame_bytes)`` executes one whole frame (or the bytes of a frame cut short, which
    the bridge answers ``TIMEOUT``) and returns the reply's bytes.
    """

    def __init__(self, *, word_bytes, size_words, max_data, csrs, status_csrs, info,
                 running=False):
        self.word_bytes, self.size_words, self.max_data = word_bytes, size_words, max_data
        self.csrs, self.status_csrs, self.info = list(csrs), status_csrs, info
        self.mem = {}
        self.started = False
        self.running = running
        self.starts = 0
        self.resets = 0

    def word(self, addr):
        return self.mem.get(addr, 0)

    def feed(self, data, *, lost=False):
        S, C = hp.Status, hp.Command
        data = bytes(data)
        start = data.index(hp.SYNC)
        body = data[start + 1:]
        if len(body) < 4:
            return hp.reply(body[0] if body else 0, body[1] if len(body) > 1 else 0,
                            S.FRAMING if lost else S.TIMEOUT)
        cmd, seq = body[0], body[1]
        n = int.from_bytes(body[2:4], "little")
        if n > hp.max_len(self.max_data):
            return hp.reply(cmd, seq, S.LENGTH)
        if len(body) < 4 + n + 2:
            return hp.reply(cmd, seq, S.FRAMING if lost else S.TIMEOUT)
        payload = body[4:4 + n]
        wb = self.word_bytes
        if lost:
            return hp.reply(cmd, seq, S.FRAMING)
        if hp.crc16(body[:4 + n + 2]) != 0:
            return hp.reply(cmd, seq, S.CRC)
        if cmd == C.INFO:
            return hp.reply(cmd, seq, S.LENGTH) if n else hp.reply(cmd, seq, S.OK,
                                                                  self.info.pack())
        if cmd == C.WRITE:
            if n < 4 + wb or (n - 4) % wb:
                return hp.reply(cmd, seq, S.LENGTH)
            addr = int.from_bytes(payload[:4], "little")
            words = [int.from_bytes(payload[4 + k * wb:4 + (k + 1) * wb], "little")
                     for k in range((n - 4) // wb)]
            if addr + len(words) > self.size_words:
                return hp.reply(cmd, seq, S.RANGE)
            if self.running:
                return hp.reply(cmd, seq, S.BUSY)
            for k, w in enumerate(words):
                self.mem[addr + k] = w
            return hp.reply(cmd, seq, S.OK)
        if cmd == C.READ:
            if n != 6:
                return hp.reply(cmd, seq, S.LENGTH)
            addr = int.from_bytes(payload[:4], "little")
            count = int.from_bytes(payload[4:6], "little")
            if count == 0 or count > self.max_data // wb or addr + count > self.size_words:
                return hp.reply(cmd, seq, S.RANGE)
            if self.running:
                return hp.reply(cmd, seq, S.BUSY)
            out = b"".join(self.word(addr + k).to_bytes(wb, "little") for k in range(count))
            return hp.reply(cmd, seq, S.OK, out)
        if cmd == C.CSR:
            if n != 4:
                return hp.reply(cmd, seq, S.LENGTH)
            first = int.from_bytes(payload[:2], "little")
            count = int.from_bytes(payload[2:4], "little")
            if count == 0 or count > self.max_data // 4:
                return hp.reply(cmd, seq, S.RANGE)
            out = b"".join(self.csr(first + k).to_bytes(4, "little") for k in range(count))
            return hp.reply(cmd, seq, S.OK, out)
        if cmd == C.START:
            if n:
                return hp.reply(cmd, seq, S.LENGTH)
            if self.started:
                return hp.reply(cmd, seq, S.STARTED)
            self.started = True
            self.starts += 1
            return hp.reply(cmd, seq, S.OK)
        if cmd == C.RESET:
            if n:
                return hp.reply(cmd, seq, S.LENGTH)
            self.started = False
            self.resets += 1
            return hp.reply(cmd, seq, S.OK)
        if cmd == C.STATUS:
            if n:
                return hp.reply(cmd, seq, S.LENGTH)
            flags = (hp.Flags.RUNNING if self.running else 0) | (
                hp.Flags.STARTED if self.started else 0)
            cyc, unit, code = (self.csr(a) for a in self.status_csrs)
            return hp.reply(cmd, seq, S.OK, hp.RunStatus(flags, code, unit, cyc).pack())
        return hp.reply(cmd, seq, S.COMMAND)

    def csr(self, addr):
        return self.csrs[addr] if addr < len(self.csrs) else 0
