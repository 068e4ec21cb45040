"""Training one model on one process or one Horovod rank: the loop, its step, its checkpoints and its log.

    loop.py         train(): set-up, steps, finish (nanoGPT's train.py, in TensorFlow)
    trainer.py      the model, its optimizer and the step functions
    dist.py         single process vs Horovod: the only place training touches Horovod
    checkpoints.py  where checkpoints are, resuming from them, loading a trained model
    evaluate.py     dev and test evaluation during training (beam search, sacrebleu), the best checkpoint
    heldout.py      the loss in evaluation mode on a slice of the training data (question 3)
    schedule.py     the Keras side of the learning-rate policy (the formula is nmtkit.lr's)
    precision.py    the precision and XLA decisions (reads bf16_quality.json and bf16_speed.json beside it)
    peaks.py        peak FLOP/s by device and precision, MFU's denominator
    fp16.py         what float16 does to a model's gradients, with and without the loss scale (notebook 02)
    metrics.py      what a step costs and how it is reported (MFU, the step window)
    reporter.py     the training log, read once per log interval
    budget.py       what a run will cost, and when to stop it
    signals.py      stop at the next step on SIGINT/SIGTERM
"""
