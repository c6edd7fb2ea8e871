"""The compiled walk over a compressed batch's records (kpybroker/protocol/_record_framing.c).

Everything else is declared in pyproject.toml; an extension module needs this file with the
setuptools this project supports (pyproject's ``ext-modules`` table is still experimental).
``optional=True``: without a C compiler or Python's headers the build warns and goes on,
and kpybroker.protocol.record_framing falls back to its Python walk.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kpybroker.protocol._record_framing",
            ["kpybroker/protocol/_record_framing.c"],
            optional=True,
        )
    ]
)
