"""The local Spark session of the capture job's tests: one per test module (module scope), so that each
module's tests share it and pytest-xdist's ``--dist loadfile`` keeps them on one worker."""
from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from kafkawire.capture_spark.session import session
    spark = session("local[2]")
    yield spark
    spark.stop()
