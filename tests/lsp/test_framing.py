"""The server never goes deaf: malformed frames are skipped and the next message is answered; the lifecycle
follows the LSP spec (InvalidRequest after shutdown, exit codes, exit at once). Raw bytes on a spawned server's
stdin (the client library would refuse to send them), and the frame reader alone on random corruptions."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from gradguard.lsp.framing import FrameReader, parse_headers, request_id
from lsp_helpers import server_env


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def hover(msg_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}}}


class RawServer:
    """`gradguard lsp` over stdio, written to byte by byte; its output read by a thread."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gradguard", "lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env())
        self.messages: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            line = out.readline()
            if not line:
                return
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
                while out.readline().strip():
                    pass
                self.messages.append(json.loads(out.read(n)))

    def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if isinstance(data, bytes) else frame(data))
        self.proc.stdin.flush()

    def answer(self, msg_id: Any, timeout: float = 15.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for m in self.messages:
                if m.get("id") == msg_id and ("result" in m or "error" in m):
                    return m
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}) before answering {msg_id!r}")
            time.sleep(0.02)
        raise AssertionError(f"no answer to {msg_id!r}: the server went deaf")

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        self.answer("init", 60)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


@pytest.fixture()
def server():
    s = RawServer()
    try:
        s.initialize()
        yield s
    finally:
        s.close()


BAD_FRAMES = {
    "non-numeric length": b"Content-Length: abc\r\n\r\n" + json.dumps(hover(None)).encode(),
    "negative length": b"Content-Length: -5\r\n\r\n{}",
    "missing length": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{\"jsonrpc\": \"2.0\"}",
    "binary garbage": bytes(range(256)) * 3,
    "garbage lines": b"hello\r\nworld\r\n\r\n\x00\x01\xff\r\n\r\n",
    "no blank line": b"Content-Length: 2\r\n{}",
    "huge length": b"Content-Length: 99999999999999\r\n\r\n{}",
    "length too long": b"Content-Length: 500\r\n\r\n" + json.dumps(hover("long")).encode(),
    "length too short": b"Content-Length: 20\r\n\r\n" + json.dumps(hover("short")).encode(),
    "not json": b"Content-Length: 9\r\n\r\n{garbage}",
    "two lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "lf only": b"Content-Length: 2\n\n{}",
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES), ids=list(BAD_FRAMES))
def test_malformed_frame_then_the_next_message_is_answered(server: RawServer, bad: str) -> None:
    server.send(BAD_FRAMES[bad])
    server.send(hover(1))
    server.send(hover(2))
    assert server.answer(1)["result"] is None and server.answer(2)["result"] is None
    assert server.proc.poll() is None
    if bad == "length too long":  # the message itself was whole: it is answered too
        assert server.answer("long")["result"] is None
    if bad == "length too short":  # the rest of the body came right after it: the message is answered too
        assert server.answer("short")["result"] is None


def test_a_request_lost_to_bad_framing_gets_a_parse_error(server: RawServer) -> None:
    body = json.dumps(hover("lost")).encode()
    server.send(b"Content-Length: x" + b"\r\n\r\n" + body[:-1] + b"\x00}")  # neither framed nor JSON
    server.send(hover(3))
    err = server.answer("lost")["error"]
    assert err["code"] == -32700 and "could not read this request" in err["message"]
    assert server.answer(3)["result"] is None


def test_every_malformation_in_one_stream(server: RawServer) -> None:
    for i, data in enumerate(BAD_FRAMES.values()):
        server.send(data)
        server.send(hover(100 + i))
    for i in range(len(BAD_FRAMES)):
        server.answer(100 + i)


def test_request_after_shutdown_is_invalid_and_exit_is_0(server: RawServer) -> None:
    server.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
    assert server.answer("bye")["result"] is None
    server.send(hover(4))
    err = server.answer(4)["error"]
    assert err["code"] == -32600  # InvalidRequest
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.proc.wait(10) == 0


@pytest.mark.parametrize("hazards", [6_000, 20_000], ids=["in-a-thread", "in-a-child-process"])
def test_exit_without_shutdown_is_1_and_does_not_wait_for_a_running_check(server: RawServer, hazards: int) -> None:
    # A check that takes seconds (thousands of hazards with fixes), running when exit arrives; over 1 MB the
    # document is checked in a child process, which exit kills.
    big = "import torch\n" + "".join(f"x{i} = torch.randn(3, requires_grad=True)\ny{i} = x{i}.exp()\ny{i} += 1\n"
                                     for i in range(hazards))
    server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///tmp/big.py", "languageId": "python", "version": 1, "text": big}}})
    server.send(hover(5))
    server.answer(5)  # the didOpen has been read; its check is running
    t0 = time.monotonic()
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.proc.wait(10) == 1
    assert time.monotonic() - t0 < 2.0


def test_end_of_input_exits(server: RawServer) -> None:
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    assert server.proc.wait(10) == 1  # the client went away without shutdown


# ------------------------------------------------------------------------------------------- the reader alone
def read_all(data: bytes, chunk: int) -> tuple[list[bytes], list[str]]:
    pos = 0
    bad: list[str] = []

    async def read() -> bytes:
        nonlocal pos
        out = data[pos:pos + chunk]
        pos += len(out)
        return out

    async def main() -> list[bytes]:
        r = FrameReader(read, lambda d, why: bad.append(why))
        out = []
        while (b := await r.next_body()) is not None:
            if b.startswith(b"{") and b.rstrip().endswith(b"}"):
                try:
                    json.loads(b)
                except ValueError:
                    continue
                out.append(b)
        return out

    return asyncio.run(main()), bad


def test_parse_headers() -> None:
    assert parse_headers(b"Content-Length: 12") == (12, "")
    assert parse_headers(b"content-length:3\r\nContent-Type: x") == (3, "")
    assert parse_headers(b"Content-Length: 1x")[0] is None
    assert parse_headers(b"Content-Type: x")[0] is None
    assert parse_headers(b"junk\x00Content-Length: 3")[0] is None
    assert request_id(b'{"jsonrpc": "2.0", "id": 7, "method": "x"') == 7
    assert request_id(b'{"id": "a", "result": 1}') is None


@pytest.mark.parametrize("seed", range(40))
def test_random_corruption_loses_at_most_the_corrupted_and_the_next_message(seed: int) -> None:
    rnd = random.Random(seed)
    before = [frame(hover(f"a{i}")) for i in range(5)]
    after = [frame(hover(f"b{i}")) for i in range(6)]
    victim = bytearray(frame(hover("victim")))
    kind = rnd.choice(["flip", "cut", "insert", "length", "garbage"])
    if kind == "flip":
        for _ in range(rnd.randint(1, 5)):
            victim[rnd.randrange(len(victim))] = rnd.randrange(256)
    elif kind == "cut":
        del victim[rnd.randrange(len(victim)):]
    elif kind == "insert":
        at = rnd.randrange(len(victim))
        victim[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 50)))
    elif kind == "length":
        victim = bytearray(victim.replace(b"Content-Length: ", b"Content-Length: %d" % rnd.randint(0, 9), 1))
    else:
        victim = bytearray(os.urandom(rnd.randint(1, 3000)))
    stream = b"".join(before) + bytes(victim) + b"".join(after)
    got, _ = read_all(stream, rnd.choice([1, 7, 64, 65536]))
    ids = [json.loads(b)["id"] for b in got]
    assert ids[:5] == [f"a{i}" for i in range(5)]
    tail = [i for i in ids[5:] if i != "victim"]
    assert tail[-5:] == [f"b{i}" for i in range(1, 6)], (kind, ids)


@pytest.mark.parametrize("split", [20, 30, 60, None])
def test_length_too_short_with_nothing_after_it_yet(split: int | None) -> None:
    """The rest of a body whose length was too short is taken when it is all the input so far (the next message
    has not come yet, or never comes: the client may wait for this answer), whatever chunks it comes in."""
    whole = json.dumps(hover("short")).encode()
    data = b"Content-Length: 20\r\n\r\n" + whole
    chunks = [data] if split is None else [data[:len(b"Content-Length: 20\r\n\r\n") + split],
                                           data[len(b"Content-Length: 20\r\n\r\n") + split:]]

    async def read() -> bytes:
        return chunks.pop(0) if chunks else b""

    async def main() -> bytes | None:
        r = FrameReader(read)
        body = await r.next_body()
        assert body is not None
        return await r.extend_more(body)

    assert asyncio.run(main()) == whole
