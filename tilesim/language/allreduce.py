"""TVM's thread all-reduce as TileLang programs write it (``T.attr`` + ``T.comm_reducer`` +
``T.tvm_thread_allreduce``).

Contract
--------
::

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, acc)]), "reduce_scope", T.reinterpret(...)):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, out[0], tk, dtype="handle"))

Every thread of the block contributes ``value``; the threads that differ only in the named thread
indices (``tk``) form a group, and each thread of a group receives the group's reduction of its values
under the combiner into ``out[0]`` (its own element). It is a block-wide collective: every thread of the
block must execute it (as ``T.sync_threads()``). The combiner is any two-argument lambda of kernel
expressions with its identity; the combination order is the thread order (a GPU's tree order differs only
by floating-point rounding). Only ``count`` 1 and ``cond`` True are accepted; any other ``T.attr`` key is a
located error.
"""

from __future__ import annotations

from ._marker import marker


@marker()
def attr(node, attr_key, value):
    """``with T.attr(node, "reduce_scope", value):`` opens the scope of a ``T.tvm_thread_allreduce``."""


@marker()
def comm_reducer(combiner, identity):
    """A commutative reducer: ``combiner(x, y)`` (a lambda) and its identity element(s)."""


@marker()
def evaluate(value):
    """Evaluate an expression for its effect (``T.evaluate(T.tvm_thread_allreduce(...))``)."""


@marker()
def tvm_thread_allreduce(*args, dtype=None):
    """``(count, value, cond, out_element, *thread_indices)``: all-reduce ``value`` across the threads that
    differ in ``thread_indices`` into each thread's ``out_element``."""
