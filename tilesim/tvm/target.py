"""``tvm.target.Target``: a compilation-target description, as TileLang programs build and pass one.

``Target("cuda -arch=sm_90")``: ``kind.name`` is the first word (``"cuda"``), ``attrs`` holds each
``-key=value`` option (``{"arch": "sm_90"}``; a bare ``-flag`` maps to ``True``), ``str(target)`` is the
text it was made from (normalised spaces), so passing a ``Target`` as ``target=`` to ``tilesim.jit``/
``compile`` means what the string means there. ``Target.current()`` is ``None`` (tilesim has no target
scope). An empty description is a ``ValueError``.
"""

from __future__ import annotations

from types import SimpleNamespace

__all__ = ["Target"]


class Target:
    """A target description: kind (first word) and ``-key=value`` options."""

    def __init__(self, target, host=None):
        text = str(target).strip()
        if isinstance(target, dict):
            text = " ".join([str(target.get("kind", ""))] + [f"-{k}={v}" for k, v in target.items() if k != "kind"])
        words = text.split()
        if not words:
            raise ValueError("a Target needs a description such as 'cuda' or 'cuda -arch=sm_90'")
        self.kind = SimpleNamespace(name=words[0])
        self.attrs: dict = {}
        for word in words[1:]:
            key, _, value = word.lstrip("-").partition("=")
            self.attrs[key] = value if _ else True
        self.host = Target(host) if host is not None and not isinstance(host, Target) else host
        self._text = " ".join(words)

    @staticmethod
    def current(allow_none: bool = True):
        """The target of the enclosing scope: tilesim has none (``None``)."""
        return None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Target({self._text!r})"

    def __eq__(self, other) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(self._text)
