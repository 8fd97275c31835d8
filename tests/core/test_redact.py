"""Redaction patterns (lineagewire.redact), without Spark or a broker."""

from __future__ import annotations

import pytest

from lineagewire.exceptions import ConfigError
from lineagewire.redact import REDACTED, Redactor, redact_text

CASES = [
    # URL userinfo
    ("jdbc:postgresql://alice:hunter2@db:5432/sales?ssl=true", "jdbc:postgresql://alice:***@db:5432/sales?ssl=true"),
    ("https://bob:p%40ss@catalog.example/api", "https://bob:***@catalog.example/api"),
    # name=value pairs: JDBC URL parameters, query strings, properties text
    ("jdbc:derby:memory:x;create=true;user=app;password=S3cr3t;trace=1",
     "jdbc:derby:memory:x;create=true;user=app;password=***;trace=1"),
    ("jdbc:mysql://h/db?user=a&password=pw1&useSSL=true", "jdbc:mysql://h/db?user=a&password=***&useSSL=true"),
    ("https://h/x?token=abc123&page=2", "https://h/x?token=***&page=2"),
    ("fs.s3a.secret.key=AKIA/xyz", "fs.s3a.secret.key=***"),
    ("client_secret: shh", "client_secret: ***"),
    # JAAS
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="jaas-pw";',
     'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="***";'),
    # SQL OPTIONS / WITH
    ("CREATE TABLE t USING jdbc OPTIONS (url 'jdbc:x', dbtable 't', password 'sql-pw', user 'u')",
     "CREATE TABLE t USING jdbc OPTIONS (url 'jdbc:x', dbtable 't', password '***', user 'u')"),
    ("INSERT INTO t WITH ('password' = 'w-pw', 'compression' = 'zstd') SELECT 1",
     "INSERT INTO t WITH ('password' = '***', 'compression' = 'zstd') SELECT 1"),
    ("OPTIONS (`password` \"quoted \\\" pw\")", "OPTIONS (`password` \"***\")"),
    # JSON and HTTP
    ('{"api_key": "k-123", "n": 1}', '{"api_key": "***", "n": 1}'),
    ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"),
]

UNTOUCHED = [
    "SELECT key, value FROM t WHERE key = 'a'",
    "file:/tmp/warehouse/sales.db/orders",
    "INSERT OVERWRITE TABLE `mart`.`daily` PARTITION (`dt` = '2026-01-31')",
    "jdbc:derby:memory:lw1;create=true",
    "https://catalog.example/api?page=2",
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_value_patterns_redact_the_secret_and_keep_the_rest(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # idempotent


@pytest.mark.parametrize("text", UNTOUCHED)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_maps_mask_secret_key_names_and_redact_other_values() -> None:
    r = Redactor()
    got = r.mapping({"spark.hadoop.fs.s3a.secret.key": "s3", "api_token": "t", "team": "sales",
                     "url": "jdbc:postgresql://u:pw@h/db", "nested": [{"sasl_password": "x", "n": 1}]})
    assert got == {"spark.hadoop.fs.s3a.secret.key": REDACTED, "api_token": REDACTED, "team": "sales",
                   "url": "jdbc:postgresql://u:***@h/db", "nested": [{"sasl_password": REDACTED, "n": 1}]}


def test_extra_patterns_and_key_names_from_config() -> None:
    r = Redactor(extra_patterns=[r"ghp_[A-Za-z0-9]+", r"pin (?P<secret>\d+)"], extra_keys=["signature"])
    assert r.text("clone with ghp_abc123, pin 4242") == "clone with ***, pin ***"
    assert r.text("x?signature=f00d&y=1") == "x?signature=***&y=1"
    assert r.mapping({"url.signature": "f00d"}) == {"url.signature": REDACTED}
    # the built-in ones still apply
    assert r.text("password=p") == "password=***"
    assert Redactor().text("clone with ghp_abc123") == "clone with ghp_abc123"


def test_a_bad_extra_pattern_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"'ghp_\[' is not a valid regular expression"):
        Redactor(extra_patterns=["ghp_["])
