from __future__ import annotations

import pytest
from mcp_layers_core.redact import error_message, pseudonym, scrub

CANARIES = [
    "Bearer abcDEF123456ghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA",
    "ghp_0123456789abcdefghijABCDEFGHIJ",
    "xoxb-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyD-0123456789abcdefghijklmnopqrstu",
    "sk_live_0123456789abcdef",
]


@pytest.mark.parametrize("secret", CANARIES)
def test_token_shapes_are_redacted(secret: str) -> None:
    out = scrub(f"upstream said: invalid credential {secret} (retry later)")
    assert secret not in out and "[redacted]" in out and out.startswith("upstream said")


@pytest.mark.parametrize(
    "text",
    [
        "api_key=hunter2hunter2",
        'password: "p@ss word"',
        "token=abc123",
        '"client_secret":"xyz"',
        "Cookie: sid=42",
    ],
)
def test_key_value_secrets_keep_their_key_only(text: str) -> None:
    out = scrub(text)
    assert "[redacted]" in out
    assert not any(v in out for v in ("hunter2", "p@ss", "abc123", "xyz", "sid=42"))


def test_ordinary_messages_survive() -> None:
    text = "Unknown tool: get_weather (id 42). Invalid params: 'city' is required"
    assert scrub(text) == text


def test_cut_happens_after_scrubbing_and_is_bounded() -> None:
    secret = "sk-" + "a" * 40
    out = error_message("x" * 280 + " " + secret, limit=300)
    assert out is not None and len(out) <= 300 and "aaaa" not in out
    assert error_message(None) is None


def test_pseudonym_is_stable_and_short() -> None:
    assert pseudonym("s-", "abc") == pseudonym("s-", "abc") != pseudonym("s-", "abd")
    assert len(pseudonym("s-", "abc")) == 12
