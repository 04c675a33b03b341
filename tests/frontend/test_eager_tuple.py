import numpy as np

import tilesim as tilelang
import tilesim.language as T


def test_tuple_and_list_arguments_of_an_eager_kernel_are_compile_time_values():
    @tilelang.jit
    def seg_sum(x, sizes, scale=(1.0, 2.0)):
        n = T.const("n")
        x: T.Tensor((n,), "float32")
        out = T.empty((len(sizes),), "float32")
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((len(sizes),), "float32")
            for s in T.Parallel(len(sizes)):
                acc[s] = 0.0
            start = 0
            for s, size in enumerate(sizes):  # a Python loop over the list
                for i in T.serial(size):
                    acc[s] = acc[s] + x[start + i] * scale[s % 2]
                start += size
            T.copy(acc, out)
        return out

    x = np.arange(10, dtype=np.float32)
    got = np.asarray(seg_sum(x, [3, 3, 4]))
    assert np.array_equal(got, [0 + 1 + 2, (3 + 4 + 5) * 2, 6 + 7 + 8 + 9])
    got2 = np.asarray(seg_sum(x, (5, 5), scale=(1.0, 1.0)))  # another specialisation, not a cached one
    assert np.array_equal(got2, [10, 35])
