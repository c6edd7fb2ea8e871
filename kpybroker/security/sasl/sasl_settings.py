"""What the network layer needs of a SASL listener, apart from how its mechanisms are built
(``kpybroker.security.listener_sasl``): a module of its own so that the connection code can
name it without importing the mechanisms."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpybroker.security.sasl.mechanism import SaslServer


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A SASL listener's settings, with the mechanisms already configured."""

    #: ``sasl.enabled.mechanisms`` of the listener, in the order they are announced.
    mechanisms: tuple[str, ...]
    #: Makes the server side of one attempt for an enabled mechanism.
    new_server: Callable[[str], SaslServer]
    #: ``sasl.server.max.receive.size``: the largest frame read before authentication.
    max_receive_size: int
    #: ``connections.max.reauth.ms`` per mechanism (0: sessions do not expire).
    reauth_ms: Callable[[str], int]
