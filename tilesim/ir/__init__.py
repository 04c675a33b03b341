"""The tile IR: node classes (``nodes``), families (``groups``), the one traversal (``traverse``: which
fields hold IR, walks, ``regions``, ``map_stmts``), rule tables (``rules.RuleTable``), the verifier and
printer (both rule tables), read-only questions (``queries``) and ``ops`` (``tilesim ops NODE``)."""

from . import nodes as nodes  # noqa: F401
