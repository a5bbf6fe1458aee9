import numpy as np


def c_strides(shape, itemsize):
    strides = []
    for i in range(len(shape))
        strides.append(itemsize * int(np.prod(shape[i + 1:])))
    return tuple(strides)
