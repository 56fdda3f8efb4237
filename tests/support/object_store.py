"""An S3-compatible HTTP server for the tests (moto's server mode, on 127.0.0.1): captures and tables in
buckets, read and written through pyarrow's S3 file system over real HTTP."""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kafkawire-test", "AWS_SECRET_ACCESS_KEY": "kafkawire-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class ObjectStore:
    endpoint: str        # host:port
    options: list[str]   # --fs-option values that reach it
    client: object       # a boto3 S3 client, to put objects

    @property
    def query(self) -> str:
        return "&".join(self.options)

    def uri(self, bucket_path: str) -> str:
        """``s3://bucket_path`` with the options in its query (as ``--fs-option`` puts them)."""
        return f"s3://{bucket_path}?{self.query}"

    def put(self, bucket: str, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        return self.uri(f"{bucket}/{key}")


@contextlib.contextmanager
def object_store(buckets=("tables",)):
    """Starts the server with ``buckets``; yields an ``ObjectStore``. The caller puts CREDENTIALS in the
    environment of whatever reads it. moto keeps its buckets in the process, not in the server: every
    server a process starts sees the same ones, so each test module names its own buckets."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"{host}:{port}"
        client = boto3.client("s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                              aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield ObjectStore(endpoint, [f"endpoint_override={endpoint}", "scheme=http"], client)
    finally:
        server.stop()
