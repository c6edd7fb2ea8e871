"""The compiled record walks (kpybroker/protocol/_record_walks.c; kpybroker/protocol/compiled.py).

Everything else is declared in pyproject.toml; an extension module needs this file with the
setuptools this project supports (pyproject's ``ext-modules`` table is still experimental).
``optional=True``: without a C compiler or Python's headers the build warns and goes on,
and kpybroker falls back to its Python walks.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kpybroker.protocol._record_walks",
            ["kpybroker/protocol/_record_walks.c"],
            optional=True,
        )
    ]
)
