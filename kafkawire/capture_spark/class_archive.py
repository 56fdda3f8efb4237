"""The local JVM's class-data-sharing archive (CDS, Java 13+): Spark's classes mapped from a file
instead of loaded and verified at every start, which is most of a local JVM's start-up CPU
(docs/performance.md, "Capture decoding: design measurements").

The archive lives in the user's cache, named after everything it depends on (the java binary,
PySpark, the jars, the JVM options). A command that will stop its session asks for one when none
exists: its JVM writes the archive to a temporary file at exit, and ``session.stop`` publishes it
only once that JVM has exited cleanly, because a partial archive crashes the next JVM that maps it.
Publishing one removes the archives of other keys beyond the three most recently used, or unused for
30 days. ``KAFKAWIRE_SPARK_CDS=0`` turns this off.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

__all__ = ["archive_options", "archive_path", "prune_archives"]

# The JVM's CDS messages go to the command's stdout: an archive it cannot use (another JDK build, a class
# path that moved) is only a slower start, not something to print in the middle of a command's output.
_QUIET = "-Xlog:cds*=off"
ARCHIVES_KEPT = 3                     # class archives of different keys kept side by side (two venvs...)
ARCHIVE_MAX_AGE_S = 30 * 24 * 3600    # and an archive of another key unused this long is removed


def archive_options(java_options: str, write: bool) -> tuple[str, tuple[Path, Path] | None]:
    """(JVM options that map the class archive or write a new one, (temporary, final) when writing)."""
    if os.environ.get("KAFKAWIRE_SPARK_CDS", "1") == "0":
        return "", None
    try:
        final = archive_path(java_options)
        if final is None:
            return "", None
        if final.is_file():
            os.utime(final)  # its modification time says when it was last used (see prune_archives)
            return f" {_QUIET} -XX:SharedArchiveFile={final}", None
        if not write:
            return "", None
        final.parent.mkdir(parents=True, exist_ok=True)
        for stale in final.parent.glob(f"{final.name}.*.tmp"):  # left by a run that was killed
            if not _alive(stale.name.rsplit(".", 2)[-2]):
                stale.unlink(missing_ok=True)
        temporary = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        return f" {_QUIET} -XX:ArchiveClassesAtExit={temporary}", (temporary, final)
    except OSError:
        return "", None  # no cache folder: run without the archive


def prune_archives(kept: Path, keep: int = ARCHIVES_KEPT, max_age_s: float = ARCHIVE_MAX_AGE_S) -> None:
    """Remove the archives of other keys (another JDK, PySpark or venv) beyond the ``keep`` most
    recently used and any unused for ``max_age_s``: each is large (a hundred MB or more), and a key never
    comes back once its JDK or PySpark is upgraded."""
    now = time.time()
    others = []
    for path in kept.parent.glob("spark-classes-*.jsa"):
        if path != kept:
            try:
                others.append((path.stat().st_mtime, path))
            except OSError:
                continue
    others.sort(reverse=True)
    for rank, (used, path) in enumerate(others, start=1):  # the archive just published is the first kept
        if rank >= keep or now - used > max_age_s:
            path.unlink(missing_ok=True)


def archive_path(java_options: str) -> Path | None:
    """Where the archive for this java, PySpark, jars and options lives; None without a java to key it on."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    java = os.path.realpath(java)
    spark_home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    jars = sorted(p.name for p in (spark_home / "jars").glob("*.jar"))
    # the JVM checks the class path against the archive's: another install of the same PySpark (another
    # venv) needs an archive of its own
    key = hashlib.sha256("\n".join([java, str(os.stat(java).st_mtime_ns), pyspark.__version__, java_options,
                                     str(spark_home.resolve()), *jars]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafkawire"
    return cache / f"spark-classes-{key}.jsa"


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
