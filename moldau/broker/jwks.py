"""The identity provider's JSON Web Key Set for one listener's OAUTHBEARER validator, kept
current in the background (Kafka's RefreshingHttpsJwks and JwksFileVerificationKeyResolver).

- A file: URL is read when the node is made (a missing or malformed file stops it: ConfigError)
  and read again every `sasl.oauthbearer.jwks.endpoint.refresh.ms`.
- An https: or http: URL is fetched once the node starts, then on the same schedule; until the
  first fetch succeeds no token verifies. A failed fetch keeps the keys known, logs one line
  and is tried again after `retry.backoff.ms`, doubling up to `retry.backoff.max.ms`.
- A token naming a `kid` the set lacks asks for a fetch now (`expedite`), at most once every
  `EXPEDITE_INTERVAL_S`: the provider may have rotated its keys; that token is still refused.

Fetches run in a daemon thread, each bounded by `FETCH_TIMEOUT_S` and `MAX_JWKS_BYTES`, so the
event loop never waits on the network and a hung endpoint cannot hold up shutdown. The key set
is replaced whole: a validator reads `keys()` without a lock. `start()` and `stop()` own the
one refresh task.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from moldau.config.oauthbearer import JwksValidatorSettings
from moldau.config.values import ConfigError
from moldau.protocol.sasl.jwt import JsonWebKeySet, JwtError, parse_jwks

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MAX_JWKS_BYTES = 1 << 20
EXPEDITE_INTERVAL_S = 10.0
T = TypeVar("T")


class JwksSource:
    """One JWKS URL's keys: `keys()` now, refreshed between `start()` and `stop()`."""

    def __init__(self, settings: JwksValidatorSettings, *, listener_name: str = "") -> None:
        self.url = settings.jwks_url
        self._settings = settings
        self._where = f"JWKS {self.url}" + (f" (listener {listener_name})" if listener_name else "")
        self._keys = JsonWebKeySet()
        self._context = _tls_context(settings) if self.url.lower().startswith("https:") else None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._last_expedited = float("-inf")
        self.fetches = 0  # completed, successful or not (for tests and logs)
        if settings.jwks_path is not None:
            try:
                self._keys = _parse(_read_file(settings.jwks_path))
            except (OSError, JwtError) as error:
                raise ConfigError(
                    f"sasl.oauthbearer.jwks.endpoint.url={self.url}: {_reason(error)}"
                ) from None
            log.info("%s: %s", self._where, _describe(self._keys))

    def keys(self) -> JsonWebKeySet:
        return self._keys

    def expedite(self, kid: str) -> None:
        """A token named a key the set lacks: fetch now, unless one was asked for lately."""
        now = time.monotonic()
        if self._wake is None or now - self._last_expedited < EXPEDITE_INTERVAL_S:
            return
        self._last_expedited = now
        log.info("%s: no key %r, fetching the key set again", self._where, kid[:80])
        self._wake.set()

    async def start(self) -> None:
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        if self._settings.jwks_path is None:
            self._wake.set()  # the first fetch, now
        self._task = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    async def _refresh_forever(self) -> None:
        assert self._wake is not None
        settings = self._settings
        backoff_ms = settings.retry_backoff_ms
        wait_ms = settings.refresh_ms
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), wait_ms / 1000 if wait_ms else None)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                keys = await asyncio.wait_for(_in_thread(self._fetch), FETCH_TIMEOUT_S + 1)
            except Exception as error:  # (any: a bad endpoint must not end the refreshes)
                self.fetches += 1
                log.warning("%s: cannot fetch the key set: %s", self._where, _reason(error))
                wait_ms = backoff_ms
                backoff_ms = min(backoff_ms * 2 or 1, settings.retry_backoff_max_ms)
                continue
            self.fetches += 1
            if keys != self._keys:
                log.info("%s: %s", self._where, _describe(keys))
            self._keys = keys
            backoff_ms = settings.retry_backoff_ms
            wait_ms = settings.refresh_ms

    def _fetch(self) -> JsonWebKeySet:  # (in a worker thread)
        path = self._settings.jwks_path
        if path is not None:
            return _parse(_read_file(path))
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(
            request, timeout=FETCH_TIMEOUT_S, context=self._context
        ) as response:
            body: bytes = response.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise JwtError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
        return _parse(body)


def _tls_context(settings: JwksValidatorSettings) -> ssl.SSLContext:
    """The JAAS truststore's authorities, else the system's; the host name is checked."""
    if settings.trusted_pem is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cadata=settings.trusted_pem.decode("ascii"))


def _read_file(path: str) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read(MAX_JWKS_BYTES + 1)
    if len(data) > MAX_JWKS_BYTES:
        raise JwtError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
    return data


def _parse(data: bytes) -> JsonWebKeySet:
    keys = parse_jwks(data)
    if not keys.keys:
        raise JwtError("the key set holds no RSA or EC key")
    return keys


def _describe(keys: JsonWebKeySet) -> str:
    ids = ", ".join(sorted(repr(key.key_id) for key in keys.keys))
    skipped = f" ({keys.skipped} of other types left out)" if keys.skipped else ""
    return f"{len(keys.keys)} keys: {ids}{skipped}"


def _reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {FETCH_TIMEOUT_S:.0f} s"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _in_thread(function: Callable[[], T]) -> asyncio.Future[T]:
    """`function()` in a daemon thread (a hung fetch must not keep the process alive, as the
    default executor's threads would); its result or error settles the future."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(outcome)

    def run() -> None:
        try:
            outcome, error = function(), None
        except BaseException as exc:  # (handed to the loop)
            outcome, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, outcome, error)
        except RuntimeError:  # the loop has closed meanwhile
            pass

    threading.Thread(target=run, name="jwks-fetch", daemon=True).start()
    return future
