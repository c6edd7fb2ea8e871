"""The identity a request acts as: Kafka's ``KafkaPrincipal``.

A principal is a type and a name, written ``User:alice``. Every connection
has one: ``User:ANONYMOUS`` on a PLAINTEXT listener (and on SSL without a
client certificate), the distinguished name (after the mapping rules) on SSL
with one, the SASL authorization id after SASL authentication. ACLs, quotas
and ``super.users`` name principals in this form.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``type:name``; equal principals are interchangeable in ACLs, quotas and super users."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """``User:alice`` -> ``KafkaPrincipal("User", "alice")``, as Kafka's
    ``SecurityUtils.parseKafkaPrincipal``.

    The type ends at the first colon; the name may hold further colons, or be
    empty. Raises ``ValueError`` without a colon.
    """
    principal_type, colon, name = text.partition(":")
    if not colon:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return KafkaPrincipal(principal_type, name)
