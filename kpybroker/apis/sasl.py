"""SaslHandshake (key 17) and SaslAuthenticate (key 36), once no authentication is due.

The SASL exchange itself happens before any handler runs
(``server/sasl_authenticator.py``). What reaches these handlers is a
handshake or token on a connection that is not authenticating: a PLAINTEXT
or SSL listener, or a SASL connection already authenticated whose client did
not announce re-authentication. Kafka answers both with ILLEGAL_SASL_STATE.

SaslHandshake v0 is followed by bare tokens; v1 by SaslAuthenticate requests.
SaslAuthenticate v1 added the session lifetime (KIP-368), v2 is flexible.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import sasl_authenticate, sasl_handshake
from kpybroker.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


@api(sasl_handshake, 0, 1)
async def handle_sasl_handshake(
    ctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)


@api(sasl_authenticate, 0, 2)
async def handle_sasl_authenticate(
    ctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
    )
