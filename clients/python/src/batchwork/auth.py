"""How a request proves who sends it: the local runner's owner header and
per-run token (LocalAuth), or a SigV4 signature for a deployed stack's API
Gateway (SigV4), made by botocore's signer."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, Dict, Mapping, Optional, Protocol, Tuple
from urllib.parse import urlsplit

from .errors import AuthError

__all__ = ["Auth", "LocalAuth", "SigV4", "local_token", "region_of_host", "is_loopback",
           "OWNER_HEADER", "TOKEN_ENV", "TOKEN_FILE_ENV"]

#: The identity header the local runner trusts on loopback.
OWNER_HEADER = "X-Batchwork-Owner"
#: The local runner's token itself.
TOKEN_ENV = "BATCHWORK_LOCAL_TOKEN"
#: The file that holds the local runner's token, instead of the default per-port file.
TOKEN_FILE_ENV = "BATCHWORK_LOCAL_TOKEN_FILE"


class Auth(Protocol):
    """Authenticates a request just before it is sent: sets headers on it.
    ``body`` is the request's body, which a signature covers."""

    def sign(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> None:
        ...


class LocalAuth:
    """The local runner's identity: the owner header, and the run's token
    when there is one (local_token finds it).

    ``hint``, when set, is added to the message of a 401: where the token
    the client did not find would be."""

    def __init__(self, owner: str, token: str = "", hint: str = "") -> None:
        if not owner:
            raise ValueError("LocalAuth: owner is empty")
        self.owner = owner
        self.token = token
        self.hint = hint

    def sign(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> None:
        headers[OWNER_HEADER] = self.owner
        if self.token:
            headers["Authorization"] = "Bearer " + self.token

    def __repr__(self) -> str:  # never the token
        return f"LocalAuth(owner={self.owner!r}, token={'<set>' if self.token else '<none>'})"


def is_loopback(endpoint: str) -> bool:
    """The endpoint is on this machine, where the local runner is."""
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_token(path: str) -> str:
    try:
        with open(path, "r", encoding="utf-8") as f:
            tok = f.read().strip()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise AuthError(f"read the local runner's token: {e}") from e
    if not tok:
        raise AuthError(f"token file {path} is empty")
    if "\n" in tok or "\r" in tok:
        raise AuthError(f"token file {path} has more than one line; want the token alone")
    return tok


def _config_dir(environ: Mapping[str, str]) -> str:
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg:
        if not os.path.isabs(xdg):
            raise ValueError(f"XDG_CONFIG_HOME {xdg!r} is not an absolute path (set {TOKEN_FILE_ENV} instead)")
        return os.path.join(xdg, "batchwork")
    home = environ.get("HOME", "")
    if not home:
        raise ValueError(f"neither XDG_CONFIG_HOME nor HOME is set, so there is no default token file (set {TOKEN_FILE_ENV})")
    return os.path.join(home, ".config", "batchwork")


def local_token(endpoint: str, environ: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """Finds the local runner's token as the batchwork command does:
    BATCHWORK_LOCAL_TOKEN, else the file BATCHWORK_LOCAL_TOKEN_FILE names,
    else the file the runner on the endpoint's port wrote in the user's
    configuration directory (``$XDG_CONFIG_HOME/batchwork/local-PORT.token``
    or ``~/.config/batchwork/local-PORT.token``). That last one only for a
    loopback address, so a token is never sent elsewhere unless the user
    said so.

    Returns the token and, when none was found, "" and a hint for the
    refusal that follows (servers that need no token still work). A file
    that is there but unusable raises AuthError."""
    env = os.environ if environ is None else environ
    tok = env.get(TOKEN_ENV, "")
    if tok:
        return tok, ""
    path = env.get(TOKEN_FILE_ENV, "")
    if path:
        try:
            return _read_token(path), ""
        except FileNotFoundError as e:
            raise AuthError(f"{TOKEN_FILE_ENV}: read the local runner's token: {e}") from e
        except AuthError as e:
            raise AuthError(f"{TOKEN_FILE_ENV}: {e}") from e
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    # A loopback address, not a name: localhost may resolve to ::1, where
    # another local user can listen on the runner's port and collect the token.
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return "", (f"set {TOKEN_ENV} (or {TOKEN_FILE_ENV}) to the token of the runner at {parts.netloc}, "
                    "or address it as 127.0.0.1")
    port = str(parts.port or {"http": "80", "https": "443"}.get(parts.scheme, ""))
    try:
        path = os.path.join(_config_dir(env), f"local-{port}.token")
    except ValueError as e:
        return "", f"no token file to read: {e}; or set {TOKEN_ENV}"
    try:
        return _read_token(path), ""
    except FileNotFoundError:
        return "", (f"no token at {path}: is batchwork-local (or make demo SERVE=1) running on port {port} as this user? "
                    f"If it wrote its token elsewhere, set {TOKEN_FILE_ENV} or {TOKEN_ENV}")


_EXECUTE_API = re.compile(r"(?:^|\.)execute-api\.([a-z0-9-]+)\.")


def region_of_host(host: str) -> str:
    """The region of ``<api>.execute-api.<region>.amazonaws.com`` ("" for any other host)."""
    m = _EXECUTE_API.search(host)
    return m.group(1) if m else ""


class SigV4:
    """Signs requests with AWS credentials for API Gateway's IAM
    authorization (service ``execute-api``), through botocore's signer.

    The credentials come from botocore's default chain (environment,
    shared files, SSO, instance roles), of ``profile`` when set; they are
    looked up again for every request, so refreshed credentials are used.
    The region is ``region``, else the one in an execute-api host name,
    else the configured one. Needs botocore: ``pip install 'batchwork[aws]'``."""

    service = "execute-api"

    def __init__(self, endpoint: str, region: str = "", profile: str = "", session: Any = None) -> None:
        try:
            import botocore.session  # type: ignore
        except ImportError as e:
            raise AuthError("signing for a deployed stack needs botocore: pip install 'batchwork[aws]'") from e
        if session is None:
            session = botocore.session.Session(profile=profile or None)
        self._session = session
        self.region = region or region_of_host(urlsplit(endpoint).hostname or "") or (session.get_config_variable("region") or "")
        if not self.region:
            raise AuthError("no AWS region to sign for: pass region= or set AWS_REGION")

    def sign(self, method: str, url: str, headers: Dict[str, str], body: bytes) -> None:
        from botocore.auth import SigV4Auth  # type: ignore
        from botocore.awsrequest import AWSRequest  # type: ignore

        creds = self._session.get_credentials()
        if creds is None:
            raise AuthError("no AWS credentials for signing: configure them as for the AWS CLI")
        req = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(creds, self.service, self.region).add_auth(req)
        headers.clear()
        headers.update({k: v for k, v in req.headers.items()})
