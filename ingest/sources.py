"""Open input files (plain, gzip, bz2) and cut them into blocks of whole lines.

The compression is recognised by its magic bytes, not the file name. Every
byte read from disk goes through a hash, so the store records a fingerprint
of exactly the bytes it was built from without a second read.
"""
import bz2
import gzip
import io
import os
import zlib

import xxhash

from .errors import IngestError

GZIP_MAGIC = b"\x1f\x8b"
BZ2_MAGIC = b"BZh"
BOM = b"\xef\xbb\xbf"         # UTF-8 byte order mark: read as if absent
HEAD_BYTES = 1 << 16            # what sniffing reads at least ...
HEAD_CAP = 64 << 20             # ... and at most, to hold whole lines


class _HashingReader(io.RawIOBase):
    """Raw file wrapper that hashes and counts every byte read."""

    def __init__(self, f):
        self._f = f
        self.hash = xxhash.xxh3_128()
        self.nread = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = self._f.readinto(b)
        if n:
            self.hash.update(memoryview(b)[:n])
            self.nread += n
        return n

    def close(self):
        self._f.close()
        super().close()


def compression_of(path):
    with open(path, "rb") as f:
        head = f.read(3)
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:3] == BZ2_MAGIC:
        return "bz2"
    return None


def _whole_lines(text, k):
    """True if ``text`` holds ``k`` newline-terminated data lines (not blank,
    not '#')."""
    n = 0
    start = 0
    while n < k:
        end = text.find(b"\n", start)
        if end < 0:
            return False
        s = text[start:end].strip()
        if s and not s.startswith(b"#"):
            n += 1
        start = end + 1
    return True


class Source:
    """One input file, read as a stream of blocks that end on a newline.

    ``blocks()`` yields ``bytes`` objects, each ending with ``b"\\n"``.
    ``raw_bytes_read`` (compressed bytes consumed) feeds the progress bar;
    ``digest()`` is the XXH3-128 of the file's bytes on disk, valid once the
    file has been read to the end.
    """

    def __init__(self, path, block_size=8 << 20):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise IngestError(self.path, "no such file")
        if os.path.isdir(self.path):
            raise IngestError(self.path, "is a directory, not a file")
        self.size = os.path.getsize(self.path)
        self.compression = compression_of(self.path)
        self.block_size = block_size
        self._raw = None

    @property
    def raw_bytes_read(self):
        return self._raw.nread if self._raw is not None else 0

    def digest(self):
        return self._raw.hash.hexdigest()

    def _open(self):
        self._raw = _HashingReader(open(self.path, "rb"))
        buffered = io.BufferedReader(self._raw, buffer_size=1 << 20)
        if self.compression == "gzip":
            return gzip.GzipFile(fileobj=buffered, mode="rb")
        if self.compression == "bz2":
            return bz2.BZ2File(buffered, mode="rb")
        return buffered

    def head(self, nbytes=HEAD_BYTES, lines=3, cap=HEAD_CAP):
        """The first text of the file (decompressed, without a UTF-8 BOM), for
        sniffing: at least ``nbytes``, and more until it holds ``lines`` whole
        data lines (not blank, not '#'), the end of the file or ``cap`` bytes.
        It ends after its last newline unless the file ends first, so no line
        in it is cut: a line of 7,000+ CSV columns or an 11 MB svmlight row is
        sniffed whole. A first line longer than ``cap`` is an error.
        ``lines=0``: just the first ``nbytes``, cut anywhere."""
        f = self._open()
        buf = bytearray()
        eof = False
        want = nbytes
        try:
            while True:
                if len(buf) < want:
                    chunk = f.read(want - len(buf))
                    if not chunk:
                        eof = True
                        break
                    buf += chunk
                    continue
                if _whole_lines(buf, lines) or want >= cap:
                    break
                want = min(2 * want, cap)
        except (EOFError, OSError, zlib.error) as e:
            raise IngestError(self.path, f"cannot decompress ({self.compression}): {e}")
        finally:
            f.close()
            self._raw = None
        text = bytes(buf)
        del buf
        if text.startswith(BOM):
            text = text[len(BOM):]
        if not eof and lines:
            cut = text.rfind(b"\n")
            if cut < 0:
                raise IngestError(self.path, f"the first line is longer than {cap >> 20} MB "
                                             "(no newline in it)")
            text = text[:cut + 1]
        return text

    def blocks(self):
        f = self._open()
        carry = b""
        first = True
        try:
            while True:
                try:
                    chunk = f.read(self.block_size)
                except EOFError:
                    raise IngestError(
                        self.path,
                        f"truncated {self.compression} stream: the compressed data "
                        "ends before its end-of-stream marker") from None
                except (OSError, zlib.error) as e:
                    raise IngestError(self.path, f"corrupt {self.compression} data: {e}") from None
                if not chunk:
                    break
                if first:
                    if len(chunk) < len(BOM) and BOM.startswith(chunk):
                        chunk += f.read(len(BOM) - len(chunk))   # a tiny block size
                    first = False
                    if chunk.startswith(BOM):
                        chunk = chunk[len(BOM):]
                        if not chunk:
                            continue
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    carry += chunk
                    if len(carry) > 64 * self.block_size:
                        raise IngestError(self.path, "a single line is longer than "
                                          f"{64 * self.block_size >> 20} MB")
                    continue
                block = carry + chunk[:cut + 1] if carry else chunk[:cut + 1]
                carry = chunk[cut + 1:]
                yield block
            if carry:
                yield carry + b"\n"
        finally:
            f.close()
