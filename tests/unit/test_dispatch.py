"""What dispatch does before any handler runs: versions, unknown keys, malformed bodies."""

import asyncio

import pytest

from kpybroker.apis.support.api_index import API_INDEX
from kpybroker.apis.support.registry import CloseConnection
from kpybroker.protocol.framing import encode_request
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.produce import ProduceRequest
from kpybroker.server.dispatch import answer


def run(frame: bytes):
    answered = asyncio.run(
        answer(bytearray(frame[4:]), services=None, client_host="h", listener="L")
    )
    return None if answered is None else answered[0]


def test_too_new_api_versions_gets_a_v0_unsupported_version_answer() -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 9, "c"))
    frame[6:8] = (99).to_bytes(2, "big")
    parts = run(bytes(frame))
    spec = API_INDEX[18]
    expected = (
        bytes.fromhex("00000009 0023 00000001 0012")
        + spec.advertised_min.to_bytes(2, "big")
        + spec.max_version.to_bytes(2, "big")
    )
    body = b"".join(parts)
    assert body[4:] == expected
    assert int.from_bytes(body[:4], "big") == len(expected)


def test_unknown_api_key_closes_the_connection() -> None:
    with pytest.raises(CloseConnection):
        run(b"\x00\x00\x00\x0a" + bytes.fromhex("7fff 0000 00000001 ffff"))


def test_produce_below_v3_is_advertised_but_refused() -> None:
    assert API_INDEX[0].advertised_min == 0
    frame = encode_request(ProduceRequest(acks=1, timeout_ms=100), 3, 1, "c")
    patched = bytearray(frame)
    patched[6:8] = (2).to_bytes(2, "big")
    with pytest.raises(CloseConnection):
        run(bytes(patched))


def test_malformed_body_closes_the_connection() -> None:
    frame = encode_request(ProduceRequest(acks=1, timeout_ms=100), 7, 1, "c")
    with pytest.raises(CloseConnection):
        run(frame[:-2])


def test_a_handler_may_be_given_for_the_api_versions_before_authentication() -> None:
    """A v5 ApiVersions naming another cluster: REBOOTSTRAP_REQUIRED from the registered
    handler, answered without that check before authentication (as the connection asks)."""
    from kpybroker.apis.api_versions import answer_before_authentication
    from tests.helpers.fake_services import services

    request = ApiVersionsRequest(
        client_software_name="c", client_software_version="1", cluster_id="other", node_id=0
    )
    frame = bytearray(encode_request(request, 5, 9, "c"))[4:]
    fakes = services()
    for handler, expected in ((None, 129), (answer_before_authentication, 0)):
        answered = asyncio.run(
            answer(bytearray(frame), fakes, client_host="h", listener="L", handler=handler)
        )
        assert answered is not None and answered[1].error_code == expected
