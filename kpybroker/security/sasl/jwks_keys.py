"""The keys that check signed OAuth tokens: the identity provider's JSON web key set (JWKS).

Kafka reads the set from ``sasl.oauthbearer.jwks.endpoint.url`` (its
``VerificationKeyResolverFactory``), and so does this module:

- a ``file:`` URL is read at start and again whenever the file's modification time changes
  (``JwksFileVerificationKeyResolver``), so keys can be rotated by replacing the file;
- an ``http(s):`` URL is fetched at start, then every ``refresh.ms`` in the background, with
  Kafka's exponential backoff between failed attempts, and at once when a token names a key
  id the set lacks (``RefreshingHttpsJwks.maybeExpediteRefresh``: at most once a minute per
  key id, for at most 16 ids). Fetches run in a worker thread (urllib; the event loop is never
  blocked) with jose4j's limits: 20 s timeouts, a 512 KiB body. HTTPS is verified against the
  system trust store unless an ``ssl.SSLContext`` says otherwise.

A key is chosen for a token as jose4j's ``VerificationJwkSelector`` chooses it: the token's
``kid`` if it names one, a key type (and curve) fitting the token's algorithm, and the key's
own ``use``, ``key_ops`` and ``alg`` when it states them. Tying the algorithm to the key type
is what keeps an attacker from having an RSA public key used as an HMAC secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import itertools
import json
import logging
import ssl
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jwt

log = logging.getLogger(__name__)

#: The algorithms tokens may be signed with, and the key type (and EC curve) each needs.
KEY_TYPES: dict[str, tuple[str, str | None]] = {
    **{f"RS{bits}": ("RSA", None) for bits in (256, 384, 512)},
    **{f"PS{bits}": ("RSA", None) for bits in (256, 384, 512)},
    **{f"HS{bits}": ("oct", None) for bits in (256, 384, 512)},
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "ES256K": ("EC", "secp256k1"),
    "EdDSA": ("OKP", None),
}

_TIMEOUT_S = 20.0
_MAX_BODY_BYTES = 512 * 1024
_MISSING_KEY_ID_CACHE_MAX_ENTRIES = 16
_MISSING_KEY_ID_CACHE_IN_FLIGHT_MS = 60_000
_MISSING_KEY_ID_MAX_KEY_LENGTH = 1000
#: What a failed fetch raises: network and TLS errors, HTTP errors, a body that is no JWKS.
_FETCH_ERRORS = (OSError, ValueError, http.client.HTTPException)


class NoVerificationKeyError(LookupError):
    """No key in the set can check the token."""


class JwksUnavailableError(Exception):
    """The key set could not be fetched at start."""


class JsonWebKeySet:
    """A parsed key set. Keys that cannot be used (an unknown ``kty``, a broken value) are
    passed over when choosing, as jose4j drops them when parsing."""

    def __init__(self, keys: Sequence[Mapping[str, Any]]) -> None:
        self._keys = tuple(keys)
        #: (key index, algorithm) -> the key bound to that algorithm, None if unusable.
        self._bound: dict[tuple[int, str], jwt.PyJWK | None] = {}

    @classmethod
    def parse(cls, document: bytes | str) -> JsonWebKeySet:
        """Raises ``ValueError`` when ``document`` is not a JWKS."""
        data = json.loads(document)
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise ValueError("The JSON JWKS content does not include the keys member.")
        return cls([key for key in keys if isinstance(key, dict)])

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(key["kid"] for key in self._keys if isinstance(key.get("kid"), str))

    def select(self, header: Mapping[str, Any]) -> jwt.PyJWK | None:
        """The first key fit to check a token with this (already checked) header."""
        alg = header["alg"]
        kty, crv = KEY_TYPES[alg]
        kid = header.get("kid")
        for index, key in enumerate(self._keys):
            key_ops = key.get("key_ops")
            if (
                (kid is not None and key.get("kid") != kid)
                or key.get("kty") != kty
                or (crv is not None and key.get("crv") != crv)
                or key.get("use", "sig") != "sig"
                or (isinstance(key_ops, list) and "verify" not in key_ops)
                or key.get("alg", alg) != alg
            ):
                continue
            bound = self._bind(index, alg)
            if bound is not None:
                return bound
        return None

    def _bind(self, index: int, alg: str) -> jwt.PyJWK | None:
        if (index, alg) not in self._bound:
            try:
                self._bound[index, alg] = jwt.PyJWK(dict(self._keys[index]), algorithm=alg)
            except jwt.PyJWTError as e:
                log.debug("Ignoring a JWK that cannot be used: %s", e)
                self._bound[index, alg] = None
        return self._bound[index, alg]

    def __str__(self) -> str:
        return json.dumps(
            [{k: key.get(k) for k in ("kty", "kid", "use", "alg")} for key in self._keys]
        )


def no_key_message(header: Mapping[str, Any], keys: JsonWebKeySet, location: str) -> str:
    return (
        f"Unable to find a suitable verification key for JWS w/ header {json.dumps(header)} "
        f"from JWKs {keys} obtained from {location}"
    )


class FileJwks:
    """A key set in a local file, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._modified_ns = -1
        self._keys = JsonWebKeySet([])

    async def start(self) -> None:
        """Reads the file; raises ``OSError`` or ``ValueError`` when it is no readable JWKS."""
        self._load()

    async def close(self) -> None:
        """Nothing runs in the background."""

    def _load(self) -> None:
        modified_ns = self._path.stat().st_mtime_ns  # before reading: a later change rereads
        self._keys = JsonWebKeySet.parse(self._path.read_bytes())
        self._modified_ns = modified_ns

    async def key_for(self, header: Mapping[str, Any]) -> jwt.PyJWK:
        try:
            if self._path.stat().st_mtime_ns != self._modified_ns:
                self._load()
        except (OSError, ValueError) as e:  # Kafka drops the connection here
            raise NoVerificationKeyError(f"Could not read the JWKS file {self._path}: {e}") from e
        key = self._keys.select(header)
        if key is None:
            raise NoVerificationKeyError(no_key_message(header, self._keys, str(self._path)))
        return key


def fetch_jwks(url: str, ssl_context: ssl.SSLContext | None) -> JsonWebKeySet:
    """One GET of the key set (blocking: run it in a thread)."""
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S, context=ssl_context) as response:
        body = response.read(_MAX_BODY_BYTES + 1)
    if len(body) > _MAX_BODY_BYTES:
        raise ValueError(f"The JWKS from {url} is larger than {_MAX_BODY_BYTES} bytes")
    return JsonWebKeySet.parse(body)


class RefreshingHttpsJwks:
    """A key set fetched over HTTP(S) and kept fresh (Kafka's ``RefreshingHttpsJwks``).

    Where Kafka rejects a token whose key id is unknown and only then refreshes the set in
    the background, this waits for that refresh (or one already under way) and tries the
    fresh set, so a token signed with a newly rotated key is accepted at its first attempt.
    """

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._refresh_ms = refresh_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._ssl_context = ssl_context or ssl.create_default_context()
        self._clock = clock
        self._keys = JsonWebKeySet([])
        #: Unknown key ids asked for lately -> when (clock, ms) they may cause a refresh again.
        self._missing_key_ids: OrderedDict[str, float] = OrderedDict()
        self._refresh_task: asyncio.Task[None] | None = None
        self._scheduled: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Fetches the set and starts the background refresh; raises ``JwksUnavailableError``
        when the set cannot be had (Kafka fails to start then too)."""
        try:
            self._keys = await self._fetch_with_retries()
        except _FETCH_ERRORS as e:
            raise JwksUnavailableError(f"Could not fetch the JWKS from {self._url}: {e}") from e
        self._scheduled = asyncio.create_task(self._refresh_on_schedule())
        log.info("The JWKS from %s will be refreshed every %d ms", self._url, self._refresh_ms)

    async def close(self) -> None:
        for task in (self._scheduled, self._refresh_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def key_for(self, header: Mapping[str, Any]) -> jwt.PyJWK:
        key = self._keys.select(header)
        if key is None:
            kid = header.get("kid")
            if kid is not None and self._should_expedite(kid):
                log.debug(
                    "Refreshing JWKs from %s as no suitable verification key for JWS w/ header "
                    "%s was found in %s",
                    self._url,
                    json.dumps(header),
                    self._keys,
                )
                self._refresh()
            if self._refresh_task is not None and not self._refresh_task.done():
                await asyncio.shield(self._refresh_task)  # its new keys may be the ones
                key = self._keys.select(header)
        if key is None:
            raise NoVerificationKeyError(no_key_message(header, self._keys, self._url))
        return key

    def _should_expedite(self, kid: str) -> bool:
        """Kafka's ``maybeExpediteRefresh``: not for absurd ids, and once a minute per id."""
        if len(kid) > _MISSING_KEY_ID_MAX_KEY_LENGTH:
            log.warning(
                "Key ID %s (trimmed to first %d characters out of %d total) was too long to cache",
                kid[:_MISSING_KEY_ID_MAX_KEY_LENGTH],
                _MISSING_KEY_ID_MAX_KEY_LENGTH,
                len(kid),
            )
            return False
        now_ms = self._clock() * 1000
        next_check_ms = self._missing_key_ids.get(kid)
        if next_check_ms is not None and next_check_ms > now_ms:
            self._missing_key_ids.move_to_end(kid)
            return False
        self._missing_key_ids[kid] = now_ms + _MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
        self._missing_key_ids.move_to_end(kid)
        if len(self._missing_key_ids) > _MISSING_KEY_ID_CACHE_MAX_ENTRIES:
            self._missing_key_ids.popitem(last=False)
        return True

    def _refresh(self) -> asyncio.Task[None]:
        """The refresh under way, or a new one: whoever asks meanwhile shares it."""
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.create_task(self._refresh_keys())
        return self._refresh_task

    async def _refresh_on_schedule(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self._refresh_ms / 1000
            await asyncio.sleep(due - loop.time())
            await asyncio.shield(self._refresh())

    async def _refresh_keys(self) -> None:
        log.info("OAuth JWKS refresh of %s starting", self._url)
        try:
            keys = await self._fetch_with_retries()
        except _FETCH_ERRORS:
            log.warning(
                "OAuth JWKS refresh of %s encountered an error; not updating local JWKS cache",
                self._url,
                exc_info=True,
            )
            return
        for kid in keys.key_ids:
            self._missing_key_ids.pop(kid, None)
        self._keys = keys
        log.info("OAuth JWKS refresh of %s complete", self._url)

    async def _fetch_with_retries(self) -> JsonWebKeySet:
        """Kafka's ``Retry``: attempts until ``retry.backoff.max.ms`` has passed, waiting
        ``retry.backoff.ms`` doubled at each failure; the first error is the one raised."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self._retry_backoff_max_ms / 1000
        first_error: Exception | None = None
        for attempt in itertools.count(1):
            try:
                return await asyncio.to_thread(fetch_jwks, self._url, self._ssl_context)
            except _FETCH_ERRORS as e:
                log.warning("Error during retry attempt %d: %s", attempt, e)
                first_error = first_error or e
            wait = min(self._retry_backoff_ms * 2 ** (attempt - 1) / 1000, end - loop.time())
            if wait <= 0:
                break
            await asyncio.sleep(wait)
        assert first_error is not None
        raise first_error
