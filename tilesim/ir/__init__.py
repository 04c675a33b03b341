"""The tile IR: node classes (``nodes``), families (``groups``), verifier and printer."""

from . import nodes as nodes  # noqa: F401
