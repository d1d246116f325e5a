"""RIFF/WAVE headers, and the plain telephone WAVs decoded without an ffmpeg process.

Most call recordings are WAVs of 16-bit PCM or G.711 (A-law, mu-law) at 8 kHz.
For those the header says everything (``read_header``), and decoding is a table
lookup and a resampling: done in the worker's own process, through libav's own
PCM decoders and its resampler (PyAV), so a short call no longer pays an ffmpeg
process start-up. Only the bytes of the data chunk reach the decoder, never a
demuxer, and only in fixed-size blocks, so a worker's memory stays flat. The
header is read as ffmpeg reads it, and where the two could differ (a second
format or data chunk, a byte rate or block size that is not what the rate and
channels make, a sub-format ffmpeg would not read as the plain codec, an
S/PDIF burst in 16-bit PCM) the file is left to ffprobe and ffmpeg, as is every
other codec and container: the transcript and the redacted rendition (always
ffmpeg's) hear the same audio on the same clock.
"""

from __future__ import annotations

import struct
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, cast

import av
import numpy as np

from asr_tasks.models import SAMPLE_RATE

EXTENSIBLE = 0xFFFE  # WAVE_FORMAT_EXTENSIBLE: the codec's tag is the start of a sub-format GUID
# the rest of that GUID for the tags of the plain formats (KSDATAFORMAT_SUBTYPE_PCM and its kin)
SUBFORMAT_TAIL = bytes.fromhex("000000001000800000aa00389b71")
FMT_BYTES = 40  # the most of a format chunk read: PCM's 16 bytes, or 40 with the extensible fields
BLOCK_FRAMES = 1 << 19  # 64 s of 8 kHz audio per block read
# ffmpeg's names and the bytes of one sample, by (format tag, bits per sample)
PLAIN_CODECS = {(1, 8): ("pcm_u8", 1), (1, 16): ("pcm_s16le", 2), (1, 24): ("pcm_s24le", 3),
                (1, 32): ("pcm_s32le", 4), (3, 32): ("pcm_f32le", 4), (6, 8): ("pcm_alaw", 1),
                (7, 8): ("pcm_mulaw", 1)}
IN_PROCESS_CODECS = {"pcm_s16le", "pcm_alaw", "pcm_mulaw"}
# chunks that make ffmpeg read a WAV otherwise than its format and data chunks say: XMA2 and SMV0 anywhere,
# and after the data another format or data chunk (ffmpeg reads on, and a later data chunk is the one it plays)
FOREIGN_CHUNKS = {b"XMA2", b"SMV0"}
AMBIGUOUS_CHUNKS = {b"fmt ", b"data"} | FOREIGN_CHUNKS
SPDIF_SYNC = bytes.fromhex("72f81f4e")  # IEC 61937 (AC-3, DTS) inside 16-bit PCM, which ffmpeg decodes as such
SPDIF_PROBE_BYTES = 1 << 16  # how much of the data ffmpeg looks into for it
MAX_CHUNKS = 64


@dataclass(frozen=True)
class WavHeader:
    """What a RIFF/WAVE header says: the format chunk's fields and where the data chunk starts."""

    format_tag: int
    channels: int
    sample_rate: int
    byte_rate: int
    bits: int
    block_align: int
    data_size: int | None  # None: a streamed WAV that does not state its length
    data_offset: int

    @property
    def codec(self) -> str | None:
        """ffmpeg's name for the codec, for the plain formats that need no ffprobe; None for the rest."""
        plain = PLAIN_CODECS.get((self.format_tag, self.bits))
        return plain[0] if plain else None

    @property
    def plain(self) -> bool:
        """A sized WAV of a plain codec whose byte rate and block size are what its rate, channels and sample
        width make: its header alone says what it holds, as ffmpeg would read it."""
        plain = PLAIN_CODECS.get((self.format_tag, self.bits))
        return (plain is not None and self.data_size is not None and self.channels > 0 and self.sample_rate > 0
                and self.byte_rate == self.sample_rate * self.channels * plain[1]
                and self.block_align == self.channels * plain[1])

    @property
    def decodable_in_process(self) -> bool:
        """A plain 16-bit PCM or G.711 WAV."""
        return self.plain and self.codec in IN_PROCESS_CODECS


def read_header(path: Path) -> WavHeader | None:
    """The header of a RIFF/WAVE file up to its data chunk; None when the file is not one, is damaged, or holds
    what ffmpeg could read otherwise than these chunks say (``AMBIGUOUS_CHUNKS``, a format chunk too short, an
    IEC 61937 stream in 16-bit PCM): ffprobe and ffmpeg decide such a file."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        fmt: bytes | None = None
        for _ in range(MAX_CHUNKS):  # chunks before "data": fmt, LIST, fact, ...
            chunk = fh.read(8)
            if len(chunk) < 8:
                return None
            chunk_id, chunk_size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
            if chunk_id == b"data":
                header = _header(fmt or b"", chunk_size, fh.tell())
                if header is None or header.data_size is None:
                    return header
                end = header.data_offset + header.data_size + (header.data_size & 1)
                if _more_chunks_that_matter(fh, end, size) or _spdif(fh, header):
                    return None
                return header
            end = fh.tell() + chunk_size + (chunk_size & 1)
            if (end > size or chunk_id in FOREIGN_CHUNKS or (chunk_id == b"LIST" and chunk_size < 4)
                    or (chunk_id == b"fmt " and (fmt is not None or chunk_size < 16))):
                return None
            if chunk_id == b"fmt ":
                fmt = fh.read(min(chunk_size, FMT_BYTES))
            fh.seek(end)
    return None


def _header(fmt: bytes, data_size: int, data_offset: int) -> WavHeader | None:
    """The format chunk's fields; None without one. An extensible header names a plain codec only where ffmpeg
    reads its sub-format (cbSize of 22 or more) and its valid bits do not make it another one."""
    if len(fmt) < 16:
        return None
    tag, channels, rate, byte_rate, block_align, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == EXTENSIBLE and len(fmt) >= 40 and fmt[26:40] == SUBFORMAT_TAIL:
        extension, valid_bits = struct.unpack("<HH", fmt[16:20])
        if extension >= 22 and valid_bits in (0, bits):
            tag = struct.unpack("<H", fmt[24:26])[0]
    size = None if data_size in (0, 0xFFFFFFFF) else data_size
    return WavHeader(tag, channels, rate, byte_rate, bits, block_align, size, data_offset)


def _more_chunks_that_matter(fh: BinaryIO, position: int, size: int) -> bool:
    """Whether chunks after the data include one ffmpeg would read as more format or audio (it reads on)."""
    for _ in range(MAX_CHUNKS):
        if position + 8 > size:
            return False
        fh.seek(position)
        chunk = fh.read(8)
        if chunk[:4] in AMBIGUOUS_CHUNKS:
            return True
        chunk_size = struct.unpack("<I", chunk[4:])[0]
        position += 8 + chunk_size + (chunk_size & 1)
    return True  # too many to be sure


def _spdif(fh: BinaryIO, header: WavHeader) -> bool:
    """Whether 16-bit PCM data begins with an IEC 61937 burst (AC-3 or DTS over S/PDIF), which ffmpeg decodes."""
    if header.codec != "pcm_s16le":
        return False
    fh.seek(header.data_offset)
    return SPDIF_SYNC in fh.read(SPDIF_PROBE_BYTES)


def split_channels(path: Path, header: WavHeader, plan: list[int], out_dir: Path) -> dict[int, Path]:
    """What ``audio``'s one ffmpeg pass makes, in this process: each planned channel (-1: the mean of all)
    resampled to 16 kHz s16le into its own raw PCM file."""
    assert header.decodable_in_process and header.codec is not None
    decoder = cast(av.AudioCodecContext, av.CodecContext.create(header.codec, "r"))
    decoder.sample_rate = header.sample_rate
    decoder.layout = f"{header.channels}c"
    resamplers = {ch: av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE) for ch in plan}
    paths = {ch: out_dir / (f"ch{ch}.raw.pcm" if ch >= 0 else "mix.raw.pcm") for ch in plan}
    with ExitStack() as stack:
        sinks = {ch: stack.enter_context(open(p, "wb")) for ch, p in paths.items()}
        for frames in _decoded_blocks(path, header, decoder):
            for ch in plan:
                _write(resamplers[ch].resample(_mono(frames, ch, header.sample_rate)), sinks[ch])
        for ch in plan:
            _write(resamplers[ch].resample(None), sinks[ch])
    return paths


def _decoded_blocks(path: Path, header: WavHeader, decoder: av.AudioCodecContext) -> Iterator[np.ndarray]:
    """The data chunk's whole frames as int16 arrays of shape (frames, channels), one block at a time."""
    assert header.data_size is not None
    frame_bytes = header.byte_rate // header.sample_rate
    remaining = (min(header.data_size, path.stat().st_size - header.data_offset) // frame_bytes) * frame_bytes
    with open(path, "rb") as fh:
        fh.seek(header.data_offset)
        while remaining > 0:
            data = _read(fh, min(remaining, BLOCK_FRAMES * frame_bytes))
            remaining -= len(data)
            for frame in decoder.decode(av.Packet(data)):
                yield frame.to_ndarray().reshape(-1, header.channels)


def _read(fh: BinaryIO, size: int) -> bytes:
    data = fh.read(size)
    if len(data) < size:
        raise OSError(f"{fh.name}: the file shrank while it was read")
    return data


def _mono(frames: np.ndarray, ch: int, rate: int) -> av.AudioFrame:
    """One channel, or the plain mean of all (ffmpeg's ``pan=mono|c0<c0+c1+...``), as a mono s16 frame."""
    if ch >= 0 or frames.shape[1] == 1:
        samples = np.ascontiguousarray(frames[:, max(ch, 0)])
    else:
        samples = np.rint(frames.mean(axis=1)).astype(np.int16)
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = rate
    return frame


def _write(frames: list[av.AudioFrame], sink: BinaryIO) -> None:
    for frame in frames:
        sink.write(frame.to_ndarray().astype("<i2", copy=False).tobytes())
