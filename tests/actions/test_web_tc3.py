"""TC3-HMAC-SHA256 signing reproduces every value of Tencent Cloud's documented examples."""

from __future__ import annotations

import json

import pytest
from _web_support import fixture_path

from plait.actions.web.tc3 import sign_request, tc3_headers


def load_vectors() -> list[dict[str, str]]:
    """The vectors of ``tencentcloud_tc3_signature_vectors.txt`` (``key = <JSON string>`` lines)."""
    vectors: list[dict[str, str]] = []
    for line in fixture_path("tencentcloud_tc3_signature_vectors.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, _, value = line.partition(" = ")
        if key == "vector":
            vectors.append({})
        vectors[-1][key] = json.loads(value)
    return vectors


VECTORS = load_vectors()
CHECKED = (
    "date", "signed_headers", "hashed_request_payload", "canonical_request", "hashed_canonical_request",
    "credential_scope", "string_to_sign", "signature", "authorization",
)  # fmt: skip


def test_all_four_documented_vectors_are_present() -> None:
    assert [v["vector"][0] for v in VECTORS] == ["A", "B", "C", "D"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["vector"] for v in VECTORS])
def test_signature_matches_the_documented_example(vector: dict[str, str]) -> None:
    signed = sign_request(
        secret_id=vector["secret_id"],
        secret_key=vector["secret_key"],
        service=vector["service"],
        host=vector["host"],
        payload=vector["payload"],
        timestamp=int(vector["timestamp"]),
        action=vector["action"] if "x-tc-action" in vector["signed_headers"] else None,
        method=vector["http_method"],
        canonical_query_string=vector["canonical_query_string"],
        content_type=vector["content_type"],
    )
    for name in CHECKED:
        assert getattr(signed, name) == vector[name], name


def test_headers_of_a_signed_request() -> None:
    vector = VECTORS[1]
    signed = sign_request(
        secret_id=vector["secret_id"], secret_key=vector["secret_key"], service="cvm", host=vector["host"],
        payload=vector["payload"], timestamp=int(vector["timestamp"]), action=vector["action"],
    )  # fmt: skip
    headers = tc3_headers(signed, action="DescribeInstances", version="2017-03-12", region="ap-guangzhou", token="t")
    assert headers == {
        "Authorization": vector["authorization"],
        "Content-Type": "application/json; charset=utf-8",
        "Host": "cvm.tencentcloudapi.com",
        "X-TC-Action": "DescribeInstances",
        "X-TC-Timestamp": "1551113065",
        "X-TC-Version": "2017-03-12",
        "X-TC-Region": "ap-guangzhou",
        "X-TC-Token": "t",
    }
    assert vector["secret_key"] not in repr(signed)
