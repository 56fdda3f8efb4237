"""Build configuration beyond pyproject.toml: the optional native decoder (see pyproject.toml)."""
from setuptools import Extension, setup

setup(ext_modules=[
    # optional=True: without a C compiler the build warns and installs the pure-Python codecs.
    Extension("kafkawire.codec._decoder", ["kafkawire/codec/_decoder.c"], optional=True,
              extra_compile_args=["-O2"]),
])
