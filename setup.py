"""The package list, found rather than written down.

The import names are ``coldkeep.core`` and ``coldkeep.tui`` while the sources live
in ``core/`` and ``tui/`` (``package-dir`` in pyproject.toml maps one to the
other, subpackages included). ``[tool.setuptools.packages.find]`` can only find
packages under the names of their folders, so this finds ``core``, ``core.files``,
``tui.panes``, ... and puts ``coldkeep.`` in front: a subpackage added later is
in the wheel with no edit here. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[
        f"coldkeep.{name}" for name in find_packages(include=["core", "core.*", "tui", "tui.*"])
    ]
)
