"""The Transformer and what is computed from its shape: parameters, FLOPs, memory; decoding.

    transformer.py  the encoder-decoder in the Keras 2 API (Vaswani et al., 2017), one readable file
    layers.py       the building blocks that differ from Keras' own (same variables, same checkpoints)
    decode.py       batched greedy and beam search with a key/value cache; the Translator
    size.py         the parameter count, of a built model or of a shape (TensorFlow-free)
    flops.py        the model FLOPs of a training step, behind the MFU a run logs
    memory.py       a step's peak memory per device, projected from the shape before anything runs
"""
