"""Tencent Cloud API 3.0 request signing (TC3-HMAC-SHA256), as pure functions.

The four steps of Tencent's "Signature v3" document: canonical request, string to sign,
signature (an HMAC chain over the date, the service and ``tc3_request``), Authorization
header. `sign_request` returns every intermediate value so tests can compare each with the
documented example.

Example:
    ```python
    signed = sign_request(
        secret_id='AKID...', secret_key='...', service='cvm', host='cvm.tencentcloudapi.com',
        payload='{"Limit": 1}', timestamp=1551113065, action='DescribeInstances',
    )
    headers = tc3_headers(signed, action='DescribeInstances', version='2017-03-12', region='ap-guangzhou')
    ```
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

__all__ = ["ALGORITHM", "TC3Signature", "sign_request", "tc3_headers"]

ALGORITHM = "TC3-HMAC-SHA256"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


@dataclass(frozen=True)
class TC3Signature:
    """Every value computed while signing one request.

    Attributes:
        timestamp: Unix seconds (the ``X-TC-Timestamp`` header).
        date: UTC date of `timestamp` (``YYYY-MM-DD``).
        content_type: The signed ``Content-Type``.
        host: The signed ``Host``.
        signed_headers: ``content-type;host[;x-tc-action]``.
        hashed_request_payload: SHA-256 of the body, hex.
        canonical_request: Step 1.
        hashed_canonical_request: SHA-256 of step 1, hex.
        credential_scope: ``date/service/tc3_request``.
        string_to_sign: Step 2.
        signature: Step 3, hex.
        authorization: Step 4, the ``Authorization`` header value.
    """

    timestamp: int
    date: str
    content_type: str
    host: str
    signed_headers: str
    hashed_request_payload: str
    canonical_request: str
    hashed_canonical_request: str
    credential_scope: str
    string_to_sign: str
    signature: str
    authorization: str = field(repr=False)


def sign_request(
    *,
    secret_id: str,
    secret_key: str,
    service: str,
    host: str,
    payload: str | bytes,
    timestamp: int,
    action: str | None = None,
    method: str = "POST",
    canonical_uri: str = "/",
    canonical_query_string: str = "",
    content_type: str = JSON_CONTENT_TYPE,
) -> TC3Signature:
    """Sign one request with TC3-HMAC-SHA256.

    Args:
        secret_id: The SecretId (goes into the Authorization header).
        secret_key: The SecretKey (only used to derive the signing key).
        service: The product's service name (``'cvm'``, ``'tms'``, ``'wsa'``).
        host: The API host (``'tms.tencentcloudapi.com'``).
        payload: The request body (``''`` for GET).
        timestamp: Unix seconds; the signing date is its UTC date.
        action: When given, ``x-tc-action`` (lowercased) is signed too, as the current
            documentation recommends; None signs only ``content-type;host``.
        method: The HTTP method.
        canonical_uri: The path (always ``/`` for API 3.0).
        canonical_query_string: The query string for GET requests (``Limit=10&Offset=0``).
        content_type: The ``Content-Type`` header sent.
    """
    body = payload.encode("utf-8") if isinstance(payload, str) else payload
    date = datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d")
    headers = [("content-type", content_type), ("host", host)]
    if action is not None:
        headers.append(("x-tc-action", action.lower()))
    canonical_headers = "".join(f"{name}:{value}\n" for name, value in headers)
    signed_headers = ";".join(name for name, _ in headers)
    hashed_payload = _sha256_hex(body)
    canonical_request = "\n".join(
        [method.upper(), canonical_uri, canonical_query_string, canonical_headers, signed_headers, hashed_payload]
    )
    hashed_canonical = _sha256_hex(canonical_request.encode("utf-8"))
    scope = f"{date}/{service}/tc3_request"
    string_to_sign = "\n".join([ALGORITHM, str(timestamp), scope, hashed_canonical])
    secret_date = _hmac(("TC3" + secret_key).encode("utf-8"), date)
    secret_service = _hmac(secret_date, service)
    secret_signing = _hmac(secret_service, "tc3_request")
    signature = hmac.new(secret_signing, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    authorization = f"{ALGORITHM} Credential={secret_id}/{scope}, SignedHeaders={signed_headers}, Signature={signature}"
    return TC3Signature(
        timestamp=timestamp,
        date=date,
        content_type=content_type,
        host=host,
        signed_headers=signed_headers,
        hashed_request_payload=hashed_payload,
        canonical_request=canonical_request,
        hashed_canonical_request=hashed_canonical,
        credential_scope=scope,
        string_to_sign=string_to_sign,
        signature=signature,
        authorization=authorization,
    )


def tc3_headers(
    signed: TC3Signature,
    *,
    action: str,
    version: str,
    region: str | None = None,
    token: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The headers of a signed API 3.0 request (``Authorization``, ``X-TC-*``, ``Content-Type``, ``Host``)."""
    headers = {
        "Authorization": signed.authorization,
        "Content-Type": signed.content_type,
        "Host": signed.host,
        "X-TC-Action": action,
        "X-TC-Timestamp": str(signed.timestamp),
        "X-TC-Version": version,
    }
    if region:
        headers["X-TC-Region"] = region
    if token:
        headers["X-TC-Token"] = token
    headers.update(extra or {})
    return headers
