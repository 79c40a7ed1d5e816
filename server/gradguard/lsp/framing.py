"""Reading LSP frames (``Content-Length: N\\r\\n\\r\\n`` + N bytes of JSON) without ever going deaf.

pygls 2.1's reader (``pygls.io_.run_async``) reads one header line at a time and only recognises
``Content-Length: <digits>\\r\\n`` exactly. After one malformed frame (a non-numeric or missing Content-Length,
binary garbage, a length that does not match the body) the body that follows is read as a header line, and since
a JSON body has no newline it swallows the next frame's ``Content-Length`` line with it: every later message is
lost, the process stays alive and never answers again. A client restarts a server that died, not one that went
deaf.

This reader keeps its own byte buffer and resynchronises instead: a header block that is not a run of
``Name: value`` lines with one numeric Content-Length is skipped up to the next ``Content-Length:``; a body whose
declared length runs into the next frame's header is cut there (a JSON text cannot hold a raw CR LF inside a
string, so ``Content-Length: N\\r\\n`` cannot occur in a well-formed body); a body that is not JSON is extended up
to the next header when that makes it JSON (a length too short), else dropped. Whatever is dropped is reported
through ``on_bad`` (the server logs it and answers a request it can still identify with a ParseError), and the
next well-formed frame is read as usual. End of input ends the loop (the server then exits).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("gradguard.lsp")

MAX_HEADER_BYTES = 16 * 1024  # a header block longer than this is garbage
MAX_BODY_BYTES = 1024 * 1024 * 1024  # a declared length above this is garbage
_NEXT = re.compile(rb"content-length:", re.IGNORECASE)  # where a frame may start again
_HEADER_IN_BODY = re.compile(rb"content-length:[ \t]*\d+[ \t]*\r\n", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[ \t]*[^\r\n]*")


def parse_headers(block: bytes) -> tuple[int | None, str]:
    """(content length, "") for a well-formed header block (without the final CR LF CR LF), else (None, why)."""
    length: int | None = None
    for line in block.split(b"\r\n"):
        if not _HEADER_LINE.fullmatch(line):
            return None, f"malformed header line {line[:60]!r}"
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            v = value.strip()
            if not v.isdigit():
                return None, f"non-numeric Content-Length {v[:40]!r}"
            if length is not None:
                return None, "two Content-Length headers"
            length = int(v)
    if length is None:
        return None, "no Content-Length header"
    if length > MAX_BODY_BYTES:
        return None, f"Content-Length {length} is too large"
    return length, ""


class FrameReader:
    """Frames from a byte stream, resynchronising after malformed input (see the module docstring)."""

    def __init__(self, read: Callable[[], Awaitable[bytes]],
                 on_bad: Callable[[bytes, str], None] | None = None) -> None:
        self._read = read  # the next chunk of input; b"" at end of input
        self.on_bad = on_bad or (lambda data, why: None)
        self.buf = bytearray()
        self.eof = False

    async def _more(self) -> bool:
        if self.eof:
            return False
        chunk = await self._read()
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _discard(self, n: int, why: str) -> None:
        data = bytes(self.buf[:n])
        del self.buf[:n]
        if data.strip():
            self.on_bad(data, why)

    def _resync(self, why: str) -> None:
        """Drop input up to the next ``Content-Length:`` after the first byte (keep a tail that may be one)."""
        m = _NEXT.search(self.buf, 1)
        if m is not None:
            self._discard(m.start(), why)
        else:
            self._discard(max(1, len(self.buf) - len(b"content-length:") + 1), why)

    async def next_body(self) -> bytes | None:
        """The next frame's body, or None at end of input."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEADER_BYTES:
                    self._resync("no end of headers")
                    continue
                if not await self._more():
                    if self.buf.strip():
                        self._discard(len(self.buf), "incomplete frame at end of input")
                    return None
                continue
            if end == 0:  # stray blank lines between frames
                del self.buf[:4]
                continue
            length, why = parse_headers(bytes(self.buf[:end]))
            if length is None:
                self._resync(why)
                continue
            start = end + 4
            checked = start
            while True:
                # The next frame's header inside this body (complete or not): the declared length was too long.
                m = _HEADER_IN_BODY.search(self.buf, max(start, checked - 32))
                if m is not None and m.start() < start + length:
                    body = bytes(self.buf[start:m.start()])
                    del self.buf[:m.start()]
                    if _is_json(body):
                        return body  # the message itself is whole
                    if body.strip():
                        self.on_bad(body, f"Content-Length {length} runs into the next message")
                    break
                if len(self.buf) >= start + length:
                    body = bytes(self.buf[start:start + length])
                    del self.buf[:start + length]
                    return body
                checked = len(self.buf)
                if not await self._more():
                    self._discard(len(self.buf), f"end of input inside a {length}-byte body")
                    return None

    def extend(self, body: bytes) -> bytes | None:
        """A body that is not JSON: when it and the input up to the next header make a JSON text (the declared
        length was too short), take that input and return the whole; else None."""
        m = _HEADER_IN_BODY.search(self.buf)
        if m is None:
            return None
        cut = _NEXT.search(self.buf, 0, m.end())
        stop = cut.start() if cut is not None else m.start()
        whole = body + bytes(self.buf[:stop])
        if not _is_json(whole):
            return None
        del self.buf[:stop]
        return whole

    async def extend_more(self, body: bytes) -> bytes | None:
        """:meth:`extend`, also when the rest of the body is all the input read so far (the next message has not
        arrived yet, or there is none: the client may wait for this answer), reading on while neither a header
        nor a whole JSON text has come, up to MAX_HEADER_BYTES."""
        while True:
            got = self.extend(body)
            if got is not None or _HEADER_IN_BODY.search(self.buf) is not None:
                return got
            whole = body + bytes(self.buf)
            if self.buf and _is_json(whole):
                del self.buf[:]
                return whole
            if len(self.buf) > MAX_HEADER_BYTES or not await self._more():
                return None


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,18})')


def request_id(data: bytes) -> Any:
    """The id of the request ``data`` probably was (to answer it with an error), or None."""
    if b'"method"' not in data:
        return None
    ids = _ID.findall(data)
    if len(ids) != 1:
        return None
    try:
        return json.loads(ids[0])
    except ValueError:
        return None


async def run_async(stop_event: threading.Event, frames: FrameReader, protocol: Any,
                    error_handler: Callable[[Exception, Any], Any] | None = None) -> None:
    """pygls' main loop (``pygls.io_.run_async``) over a :class:`FrameReader`."""
    from pygls.exceptions import JsonRpcException

    while not stop_event.is_set():
        body = await frames.next_body()
        if body is None:
            break
        try:
            message = json.loads(body, object_hook=protocol.structure_message)
        except json.JSONDecodeError as exc:
            whole = await frames.extend_more(body)
            if whole is None:
                frames.on_bad(body, f"not JSON ({exc.msg})")
                continue
            try:
                message = json.loads(whole, object_hook=protocol.structure_message)
            except Exception as exc2:  # pragma: no cover - it parsed as plain JSON a moment ago
                frames.on_bad(whole, f"not a message ({exc2})")
                continue
        except Exception as exc:
            log.exception("Unable to handle message")
            if error_handler:
                error_handler(exc, JsonRpcException)
            continue
        try:
            protocol.handle_message(message)
        except Exception as exc:
            log.exception("Unable to handle message")
            if error_handler:
                error_handler(exc, JsonRpcException)
