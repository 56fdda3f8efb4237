"""The file to give spark-submit: ``spark-submit [options] .../kafkawire/capture/spark_submit.py decode ...``.

Spark runs it as a script, so it imports kafkawire absolutely (kafkawire must be installed where the
driver runs) and hands the arguments to the ``kafkawire`` command line, whose session() then finds
the session spark-submit configured.
"""
import sys

from kafkawire.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
