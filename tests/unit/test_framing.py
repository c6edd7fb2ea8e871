"""Frames and headers, byte for byte, without sockets."""

import pytest

from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.framing import (
    FrameDecoder,
    FrameTooLargeError,
    encode_request,
    parse_request_header,
    response_header,
)
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest


def test_frames_split_across_reads_are_reassembled() -> None:
    stream = b"\x00\x00\x00\x03abc\x00\x00\x00\x00\x00\x00\x00\x02xy"
    decoder = FrameDecoder(100)
    frames = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
    assert frames == [b"abc", b"", b"xy"]
    assert decoder.buffered == 0


def test_many_frames_in_one_read() -> None:
    decoder = FrameDecoder(100)
    assert decoder.feed(b"\x00\x00\x00\x01a" * 3 + b"\x00\x00") == [b"a", b"a", b"a"]


@pytest.mark.parametrize("size", [101, 2**31 - 1, -1])
def test_oversized_or_negative_frame_is_refused(size: int) -> None:
    with pytest.raises(FrameTooLargeError):
        FrameDecoder(100).feed(size.to_bytes(4, "big", signed=True))


def test_request_header_v1_and_v2() -> None:
    # Metadata v9 is flexible: header v2, with a tag section after client_id.
    v9 = encode_request(MetadataRequest(topics=None), 9, 42, "me")
    header = parse_request_header(v9[4:])
    assert header[:4] == (3, 9, 42, "me")
    assert v9[4:][header.body_offset - 1] == 0  # the empty tag section
    v1 = encode_request(MetadataRequest(topics=None), 1, 7, None)
    assert v1[4:] == bytes.fromhex("0003 0001 00000007 ffff ffffffff")
    assert parse_request_header(v1[4:]).client_id is None


def test_client_id_keeps_its_int16_length_in_header_v2() -> None:
    frame = encode_request(
        ApiVersionsRequest(client_software_name="a", client_software_version="1"), 3, 1, "cli"
    )
    assert frame[4:] == bytes.fromhex("0012 0003 00000001 0003 636c69 00 02 61 02 31 00")


def test_truncated_header_is_malformed() -> None:
    with pytest.raises(DecodeError):
        parse_request_header(b"\x00\x03\x00")
    with pytest.raises(DecodeError):
        parse_request_header(bytes.fromhex("0003 0001 00000007 0005 61"))


def test_api_versions_answers_with_header_v0_even_when_flexible() -> None:
    assert response_header(18, 3, 5) == b"\x00\x00\x00\x05"
    assert response_header(3, 9, 5) == b"\x00\x00\x00\x05\x00"
    assert response_header(3, 8, 5) == b"\x00\x00\x00\x05"
