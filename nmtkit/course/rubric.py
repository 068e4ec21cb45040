"""What a full answer to each homework question contains, and the misconceptions the original submissions showed:
the instructor's copy of notebook 04 and `nmtkit report --instructor` print it beside the kit's verdict. Student
copies and a plain `nmtkit report` never do."""

RUBRIC = {
    1: "Full marks: the hours the homework's step count takes at this run's own steady seconds per step, said to "
       "hold for this model at this shape only; a cost only for hardware that is named and priced. Wrong: scaling "
       "a small CPU model's rate up to transformer-base on GPUs; pricing local processes as cloud VMs; quoting the "
       "run's elapsed minutes as the answer.",
    2: "Full marks: a plateau rule stated in steps before looking (window and tolerance), applied to dev BLEU and "
       "eval loss, and a verdict that follows from both. Wrong: 'the loss is low, so it is trained'; max(BLEU) or "
       "the last step number as the evidence.",
    3: "Full marks: decided on the held-out loss (did it turn up from its best while the train loss kept falling?), "
       "with the step of the best. Wrong: 'fully trained, so overfitting' (a plateau is not overfitting); the sign "
       "of eval minus train loss as the verdict (dropout is on while training only); a dip of a BLEU near 2 as proof.",
    4: "Full marks: MFU from the step time and the FLOPs per step, and what utilisation cannot show: NVML counts a "
       "GPU busy while any kernel runs, NCCL's kernels included while they wait on a slow network, so 100% does not "
       "rule out a network bottleneck (the reference run's CPUs are busy nearly all the time while the link takes "
       "about half of each step). Wrong: '100% utilisation, so no network wait'; a screenshot of nvidia-smi or a "
       "dashboard: a screenshot is no measurement.",
    5: "Full marks: the measured bytes per step against the flat ring's bound 2(N-1)/N x parameters x bytes per "
       "value (2 under fp16 compression), and that exchange's time at 1 and 10 Gbit/s against the step time; says "
       "which link was measured, and gives no verdict from an assumed link. Wrong: 4 bytes per value under fp16; "
       "the flat ring's figure as exact for tree or hierarchical allreduce (it is the bound); MiB labelled MB.",
    6: "Full marks: the rates at steps 8,000 and 300,000 from the homework's config, and the shape explained by "
       "the schedule (linear warm-up, then inverse square root), computed from the step number. Wrong: 'Adam's "
       "adaptivity makes the warm-up' (Adam rescales each parameter's update; the schedule sets the rate).",
    7: "Full marks: names the files measured (train.en and train.de after cleaning; not the encoded .npy files or "
       "the archives) and gives MB (10^6 bytes) and MiB (2^20 bytes), each labelled right. Wrong: 2^20 bytes "
       "called MB; one side only; the archive's size.",
    8: "Full marks: the newest prefix's .index and .data shard(s) and the 'checkpoint' state file, taken from a "
       "listing of the run; why TensorFlow 2 writes no .meta. Wrong: every kept ckpt-N, or the best/ and data/ "
       "folders, counted as one checkpoint.",
    9: "Full marks: the size predicted from the parameter count before measuring (float32 weights plus Adam's m "
       "and v: 3x the weights), then the measured size against it. Wrong: measuring first and calling it a "
       "prediction; MiB labelled MB.",
    10: "Full marks: a step is one synchronous update of all ranks (forward, backward, allreduce, apply), so it "
        "consumes every rank's batch; the mean over steady steps in ms. Wrong: one rank's batch as the step's; "
        "the tracing steps in the mean.",
    11: "Full marks: the bytes per step are fixed by the model (measured about the ring's bound), so bytes per "
        "second follow the step rate by construction; decided by the link's share of a step, not by Pearson r. "
        "Wrong: r as a cause; a dashboard screenshot as the evidence.",
}
