"""The OTLP options, parsed: the collector's base URL and its headers. Pure."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit


class OtlpConfigError(ValueError):
    """A bad endpoint or header string, said in one line."""


def endpoint_base(value: str) -> str:
    """The collector's base URL (`http://host:4318`), from what the user gave; a full
    signal path (`…/v1/traces`) is cut back to the base."""
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtlpConfigError(
            f"mcp_otlp_endpoint must be an http(s) URL of an OTLP/HTTP collector, not "
            f"{value!r}; e.g. --set mcp_otlp_endpoint=http://127.0.0.1:4318"
        )
    base = text.rstrip("/")
    for tail in ("/v1/traces", "/v1/metrics"):
        if base.endswith(tail):
            base = base[: -len(tail)]
    return base


def parse_headers(value: str) -> dict[str, str]:
    """`key=value,key2=value2` (the format of OTEL_EXPORTER_OTLP_HEADERS, values
    URL-encoded) -> a dict. The values are never logged: they are credentials."""
    headers: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise OtlpConfigError(
                "mcp_otlp_headers must be comma-separated name=value pairs, e.g. "
                "--set mcp_otlp_headers='authorization=Bearer%20TOKEN,x-scope-orgid=team'"
            )
        headers[name.lower()] = unquote(raw.strip())
    return headers
