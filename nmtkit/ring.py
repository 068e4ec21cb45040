"""The flat ring allreduce's traffic: what each rank sends per step. TensorFlow-free, standard library only.

In a ring of N ranks each rank sends (and receives) 2(N-1) chunks of 1/N of the gradient: N-1 in the
reduce-scatter, N-1 in the allgather. The cluster's compression trials, the course's prose and the instructor's
question 5 and lab figures all use this one function.
"""


def ring_bytes(params, ranks, bytes_per_value=4):
    """Bytes each rank sends per step in a flat ring allreduce of `params` gradient values of `bytes_per_value`
    bytes: 2(N-1)/N x params x bytes. Numbers, NumPy arrays or pandas columns (plain arithmetic)."""
    return 2 * (ranks - 1) / ranks * params * bytes_per_value
