"""Client credentials: per-run client tokens.

Each run has one client secret, known to its brokers only (their configs, 0600). A client's
token is HMAC-SHA256(secret, client id): the orchestrator hands each client its own token, a
broker checks it without a list of clients, and no client can derive another's. The token
travels as gRPC metadata (TOKEN_KEY) on every Client RPC and binds the request's `client`:
a subscription stream, an unsubscribe and a publisher id belong to the client that proved it.

A broker without a secret runs in the open mode (any client may claim any id): only for local
play, only when its config says `open_clients: true`, and it logs a warning when it starts."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_KEY = "weeble-client-token"


def new_client_secret() -> str:
    return secrets.token_urlsafe(32)


def client_token(secret: str, client: str) -> str:
    return hmac.new(secret.encode(), client.encode(), hashlib.sha256).hexdigest()


def token_matches(secret: str, client: str, token: str) -> bool:
    return hmac.compare_digest(client_token(secret, client), token)
