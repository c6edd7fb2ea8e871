"""Structure-aware fuzzing of the request codecs in process (CI size: 10^4 cases).

Cases come from ``tests/helpers/fuzz``: a valid request of every API key and
version the schemas declare, drawn field by field, then its mutations. The
criteria are ``codec_target``'s: a valid request decodes to itself; anything else
decodes or raises what the server treats as malformed; a huge claimed count
allocates nothing in proportion to it. ``scripts/fuzz`` runs the same at length.
"""

from __future__ import annotations

from kpybroker.protocol.framing import encode_request, parse_request_header
from tests.helpers.fuzz import codec_target
from tests.helpers.fuzz.cases import VALID
from tests.helpers.fuzz.mutations import MUTATIONS
from tests.helpers.fuzz.pieces import PieceEncoder, header_pieces, join
from tests.helpers.fuzz.schemas import all_versions, request_schemas

CI_CASES = 10_000
SEED = 18


def test_codecs_survive_fuzzing() -> None:
    report = codec_target.run(CI_CASES, SEED)
    assert report.total >= CI_CASES
    assert set(report.cases) == {VALID, *MUTATIONS}, report.cases
    assert not report.findings


def test_every_request_version_is_fuzzed() -> None:
    """The generator covers each API key and version of the schemas, flexible or not."""
    pairs = all_versions()
    assert {key for key, _ in pairs} == set(request_schemas())
    assert len(pairs) > 250
    assert any(request_schemas()[k].flexible(v) for k, v in pairs)
    assert any(not request_schemas()[k].flexible(v) for k, v in pairs)


def test_pieces_are_the_codec_bytes() -> None:
    """The piece encoder lays a request out exactly as the generated codec encodes it."""
    schema = request_schemas()[3]  # Metadata: nullable array, tagged fields from v9
    request = schema.request_class(topics=None, allow_auto_topic_creation=True)
    for version in (4, 12):
        framed = encode_request(request, version, 7, "fuzz")
        flexible = schema.flexible(version)
        pieces = header_pieces(3, version, 7, "fuzz", flexible=flexible)
        pieces += PieceEncoder(schema, version).request(request)
        assert join(pieces) == framed[4:]
        assert parse_request_header(framed[4:]).correlation_id == 7
