"""Storage errors a user must fix are one-line StorageErrors naming the URI and endpoint (never credentials);
transient ones keep their types so the stage retries still see them.

S3 cases run against moto's standalone server with IAM auth switched on (so bad keys, bad secrets and a
user without permissions are refused as by AWS), and against a closed local port for a dead endpoint."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ads_core import storage
from ads_core.storage import errors as storage_errors

KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def one_line_naming(err: storage_errors.StorageError, *names: str, secrets: tuple[str, ...] = ()) -> None:
    text = str(err)
    assert "\n" not in text and text.startswith("storage error at ")
    for name in names:
        assert name in text, (name, text)
    for secret in secrets:
        assert secret not in text


def test_out_is_an_existing_file(tmp_path):
    out = tmp_path / "out"
    out.write_text("not a folder")
    for attempt in (
        lambda: storage.check_writable(str(out)),
        lambda: storage.write_json(str(out / "formatted" / "manifest.json"), {}),
        lambda: storage.read_json(str(out / "formatted" / "manifest.json")),
        lambda: storage.atomic_local_file(str(out / "final" / "train.parquet")).__enter__(),
    ):
        with pytest.raises(storage_errors.StorageError) as info:
            attempt()
        one_line_naming(info.value, str(out), "is a file, not a folder", "--out")
    assert out.read_text() == "not a folder"


def test_target_is_an_existing_folder(tmp_path):
    (tmp_path / "blob.json").mkdir()
    with pytest.raises(storage_errors.StorageError, match="is a folder, not a file"):
        storage.write_bytes(str(tmp_path / "blob.json"), b"x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_permission_denied_locally(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(storage_errors.StorageError) as info:
            storage.check_writable(str(locked / "out"))
        one_line_naming(info.value, "permission denied", str(locked))
        with pytest.raises(storage_errors.StorageError, match="permission denied"):
            storage.write_bytes(str(locked / "x.bin"), b"x")
    finally:
        locked.chmod(0o700)


def test_permission_error_is_a_user_error(tmp_path):
    denied = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "ro"))
    one_line_naming(
        storage_errors.as_storage_error(denied, str(tmp_path / "ro" / "x")),
        "permission denied",
        str(tmp_path / "ro"),
        "--out",
    )


def test_disk_full_is_a_user_error_and_other_errors_keep_their_type(tmp_path):
    full = OSError(errno.ENOSPC, "No space left on device")
    assert "no space left" in str(storage_errors.as_storage_error(full, str(tmp_path / "x")))
    missing = FileNotFoundError(errno.ENOENT, "gone")
    assert storage_errors.as_storage_error(missing, str(tmp_path / "x")) is None
    with pytest.raises(FileNotFoundError):  # a missing artifact stays what callers test for
        storage.read_bytes(str(tmp_path / "absent.json"))
    assert storage.check_writable(str(tmp_path / "new" / "out")) is None
    assert list((tmp_path / "new" / "out").iterdir()) == []  # the probe file is gone


# ---------------------------------------------------------------------------------------------
# S3 without a server: dead endpoint, partial credentials, limits


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for key in KEY_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADEADENDPOINT0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dead-endpoint-secret-77")
    yield monkeypatch


def test_dead_endpoint_fails_with_one_bounded_line(s3_env):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    s3_env.setenv("ADS_S3_ENDPOINT_URL", endpoint)
    started = time.monotonic()
    for attempt in (
        lambda: storage.write_bytes("s3://ads-dead/run/x.json", b"{}"),
        lambda: storage.check_writable("s3://ads-dead/run"),
    ):
        with pytest.raises(storage_errors.StorageError) as info:
            attempt()
        one_line_naming(
            info.value,
            "s3://ads-dead/run",
            endpoint,
            "unreachable",
            "ADS_S3_ENDPOINT_URL",
            secrets=("AKIADEADENDPOINT0001", "dead-endpoint-secret-77"),
        )
    print(f"dead endpoint: two operations failed in {time.monotonic() - started:.1f} s")


def test_endpoint_credentials_never_appear(s3_env):
    s3_env.setenv("ADS_S3_ENDPOINT_URL", "http://user:pw-in-url@127.0.0.1:9/")
    assert storage_errors.endpoint_of("s3://b/k") == "http://127.0.0.1:9/"


def test_empty_secret_is_partial_credentials(s3_env):
    s3_env.setenv("ADS_S3_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", "")
    with pytest.raises(storage_errors.StorageError) as info:
        storage.write_bytes("s3://ads-dead/run/x.json", b"{}")
    one_line_naming(
        info.value,
        "s3://ads-dead/run/x.json",
        "credentials",
        "AWS_SECRET_ACCESS_KEY",
        secrets=("AKIADEADENDPOINT0001",),
    )


def test_client_limits_come_from_the_environment(s3_env):
    s3_env.setenv("ADS_S3_CONNECT_TIMEOUT", "1.5")
    s3_env.setenv("ADS_S3_MAX_ATTEMPTS", "2")
    config = storage_errors.storage_options("s3://b/k")["config_kwargs"]
    assert config["connect_timeout"] == 1.5 and config["retries"] == {"max_attempts": 2, "mode": "standard"}
    s3_env.setenv("ADS_S3_READ_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="ADS_S3_READ_TIMEOUT"):
        storage_errors.storage_options("s3://b/k")


def client_error(code: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "try again"}}, "PutObject")


def transient_errors() -> list[Exception]:
    import aiohttp
    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

    reset = EndpointConnectionError(endpoint_url="http://x", error=aiohttp.ClientOSError(errno.ECONNRESET, "reset"))
    return [
        reset,
        ConnectionClosedError(endpoint_url="http://x"),
        ReadTimeoutError(endpoint_url="http://x"),
        client_error("SlowDown"),
        client_error("503"),
        client_error("InternalError"),
        ConnectionResetError("reset by peer"),
    ]


def test_transient_errors_keep_their_types():
    """Resets, 5xx and throttling are not converted, so the stage retries (tasks.retries.is_transient) see them."""
    from botocore.exceptions import EndpointConnectionError

    from ads_prefect.tasks.retries import is_transient

    for exc in transient_errors():
        assert storage_errors.as_storage_error(exc, "s3://b/k") is None, exc
    refused = EndpointConnectionError(endpoint_url="http://x", error=ConnectionRefusedError(111, "refused"))
    for exc in (refused, *map(client_error, ("NoSuchBucket", "InvalidAccessKeyId", "AccessDenied"))):
        err = storage_errors.as_storage_error(exc, "s3://b/k")
        assert isinstance(err, storage_errors.StorageError), exc
        assert not is_transient(err)


def test_is_transient_retries_every_transient_error():
    """botocore's connection errors carry response=None; is_transient must still retry them, not crash."""
    from ads_prefect.tasks.retries import is_transient

    assert any(getattr(exc, "response", 0) is None for exc in transient_errors())  # the case that used to break

    for exc in transient_errors():
        assert is_transient(exc), exc


# ---------------------------------------------------------------------------------------------
# S3 against moto with IAM auth


@dataclass
class AuthMoto:
    endpoint: str
    admin: tuple[str, str]
    nobody: tuple[str, str]  # a user with no permissions
    bucket: str = "ads-auth"


@pytest.fixture(scope="module")
def auth_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthMoto]:
    """moto_server on 127.0.0.1 whose first requests are unauthenticated (to create users and a bucket);
    afterwards every request must be signed by a known key."""
    import boto3
    import botocore.exceptions

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["INITIAL_NO_AUTH_ACTION_COUNT"] = "8"
    log = tmp_path_factory.mktemp("moto-auth") / "moto.log"
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start (see {log})") from None
                time.sleep(0.3)
        kw = {
            "endpoint_url": endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "AKIASETUP00000000000",
            "aws_secret_access_key": "setup",
        }
        iam = boto3.client("iam", **kw)
        keys = {}
        for user in ("admin", "nobody"):
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        iam.put_user_policy(
            UserName="admin",
            PolicyName="all",
            PolicyDocument='{"Version": "2012-10-17", '
            '"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}',
        )
        boto3.client("s3", **kw).create_bucket(Bucket="ads-auth")
        for _ in range(20):  # use up the unauthenticated requests left
            try:
                boto3.client("s3", **kw).list_buckets()
            except botocore.exceptions.ClientError:
                break
        else:
            raise RuntimeError("moto never switched on authentication")
        yield AuthMoto(endpoint=endpoint, admin=keys["admin"], nobody=keys["nobody"])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        assert proc.poll() is not None


@pytest.fixture
def as_user(auth_moto: AuthMoto, monkeypatch: pytest.MonkeyPatch):
    for key in KEY_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ADS_S3_ENDPOINT_URL", auth_moto.endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def use(key_id: str, secret: str) -> None:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)

    return use


def test_valid_credentials_work_and_a_missing_key_stays_file_not_found(auth_moto, as_user):
    as_user(*auth_moto.admin)
    uri = f"s3://{auth_moto.bucket}/run/x.json"
    storage.check_writable(f"s3://{auth_moto.bucket}/run")
    storage.write_json(uri, {"a": 1})
    assert storage.read_json(uri) == {"a": 1}
    assert not storage.exists(f"s3://{auth_moto.bucket}/run/absent.json")
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(f"s3://{auth_moto.bucket}/run/absent.json")
    fs, _ = storage.get_fs(uri)
    assert sorted(fs.ls(f"{auth_moto.bucket}/run")) == [f"{auth_moto.bucket}/run/x.json"]  # no probe left


def test_missing_bucket(auth_moto, as_user):
    as_user(*auth_moto.admin)
    for attempt in (
        lambda: storage.check_writable("s3://ads-no-such-bucket/run"),
        lambda: storage.write_bytes("s3://ads-no-such-bucket/run/x.json", b"{}"),
    ):
        with pytest.raises(storage_errors.StorageError) as info:
            attempt()
        one_line_naming(
            info.value,
            "s3://ads-no-such-bucket/run",
            auth_moto.endpoint,
            "'ads-no-such-bucket' does not exist",
            secrets=auth_moto.admin,
        )


@pytest.mark.parametrize("which", ["unknown key", "wrong secret"])
def test_bad_credentials(auth_moto, as_user, which):
    key_id, secret = auth_moto.admin
    as_user(*(("AKIAUNKNOWNKEY000001", secret) if which == "unknown key" else (key_id, "wrong-secret-123")))
    with pytest.raises(storage_errors.StorageError) as info:
        storage.write_bytes(f"s3://{auth_moto.bucket}/run/x.json", b"{}")
    one_line_naming(
        info.value,
        f"s3://{auth_moto.bucket}/run/x.json",
        auth_moto.endpoint,
        "credentials were rejected",
        secrets=(secret, "wrong-secret-123"),
    )


def test_permission_denied(auth_moto, as_user):
    as_user(*auth_moto.nobody)
    for attempt in (
        lambda: storage.check_writable(f"s3://{auth_moto.bucket}/run"),
        lambda: storage.exists(f"s3://{auth_moto.bucket}/run/x.json"),
    ):
        with pytest.raises(storage_errors.StorageError) as info:
            attempt()
        one_line_naming(
            info.value,
            f"s3://{auth_moto.bucket}/run",
            auth_moto.endpoint,
            "permission denied",
            secrets=auth_moto.nobody,
        )
