"""What a full answer to each homework question contains, and the misconceptions the original submissions showed:
the instructor's copy of notebook 05 and `nmtkit report --instructor` print it beside the kit's verdict. Student
copies and a plain `nmtkit report` never do."""

RUBRIC = {
    1: "Full marks: the hours the homework's step count takes at this run's own steady seconds per step, said to "
       "hold for this model at this shape only; a cost only for hardware that is named and priced. Wrong: scaling "
       "a small CPU model's rate up to transformer-base on GPUs; pricing local processes as cloud VMs; quoting the "
       "run's elapsed minutes as the answer.",
    2: "Full marks: a plateau rule stated in steps before looking (window and tolerance), applied to dev BLEU and "
       "eval loss, and a verdict that follows from both; BLEU's gain judged by a paired bootstrap over the dev "
       "sentences (the two evaluations scored on the same resampled sentences), with 'cannot tell' where its "
       "interval straddles the tolerance or the dev set is too small (the reference run's 20 sentences). Wrong: "
       "'the loss is low, so it is trained'; max(BLEU) or the last step number as the evidence; one BLEU's spread "
       "used as the noise of a difference of two; a BLEU gain on a handful of sentences taken as proof either way.",
    3: "Full marks: decided on the held-out loss (did it turn up from its best while the train loss kept falling?), "
       "with the step of the best. Wrong: 'fully trained, so overfitting' (a plateau is not overfitting); the sign "
       "of eval minus train loss as the verdict (dropout is on while training only); a dip of a BLEU near 2 as proof.",
    4: "Full marks: MFU derived per side from the shape (encoder weights x source tokens, decoder weights and the "
       "output projection x target tokens, attention over the padded lengths, backward twice the forward), per "
       "second of steady step, over the measured peak; and what utilisation cannot show. On CPUs, like with like "
       "in cores: the ranks' own processes (each a share of one core, times the ranks) against the cores the "
       "machine had busy (its percent of all its cores) and the cores present (the reference run's two hosts share "
       "one machine: its four ranks were most of its busy cores; the machine idled while they waited on the link, "
       "as a rank waiting on Gloo's allreduce sleeps); the MFU per rank is against one rank's own peak, and ranks "
       "sharing cores share that peak (against every core's: ranks x MFU / cores). On GPUs: NVML counts a GPU busy "
       "while any kernel runs, NCCL's included while they wait on a slow network, so 100% does not rule out a network "
       "bottleneck; and GPU memory at 100% is no load figure (TensorFlow reserves memory up front unless memory "
       "growth is on, as the kit and OpenSeq2Seq set it; with growth on it keeps its high-water mark: memory "
       "used says what was reserved, not what worked). Wrong: 6 x "
       "parameters x (source + target) tokens (twice the work); system CPU as the ranks' work without counting "
       "their own cores; '100% utilisation, so no network wait'; a rank's percent of one core set beside the "
       "machine's percent of all its cores ('the ranks were idle'); a screenshot of nvidia-smi or a dashboard: a "
       "screenshot is no measurement.",
    5: "Full marks: the measured bytes per step against the flat ring's bound 2(N-1)/N x parameters x bytes per "
       "value (2 under fp16 compression), and that exchange's time at 1 and 10 Gbit/s against the compute part of "
       "the step (the step minus its own exchange: a step on a slow link already holds one); says "
       "which link was measured, and gives no verdict from an assumed link. Wrong: 4 bytes per value under fp16; "
       "the flat ring's figure as exact for tree or hierarchical allreduce (it is the bound); MiB labelled MB; "
       "'the average rate was below the link's capacity, so the network was not the bottleneck' (the exchange comes "
       "in bursts at the link's rate between computations: a mean over whole steps hides them; the lab's 0.1 s "
       "samples show it); a measured rate far below the bound accepted without asking whether it is the wrong NIC "
       "(loopback or the management interface, not the data link) or the wrong unit (bytes read as bits, MB/s as "
       "Mbit/s: one submission read 3.5 MB/s).",
    6: "Full marks: from the two shipped warm-up runs' own logs (not the formula), the short run's peak step read "
       "off its logged curve, and the gaps, short minus default, in the train loss at step 100 and in the last "
       "eval loss; the verdict weighs both: the short "
       "warm-up (a peak 2x higher, 4x sooner) leads at step 100 and trails at the end, and after the longer "
       "warm-up ends both follow the same decay, so the gap was made early; one seed each is named as the limit. "
       "Wrong: the early lead alone as 'a shorter warm-up trains faster'; the rates recomputed from the formula "
       "as the answer (notebook 02 did that); 'Adam's adaptivity makes the warm-up' (Adam rescales each "
       "parameter's update; the schedule sets the rate); a gap from one seed called certain.",
    7: "Full marks: names the files measured (train.en and train.de after cleaning; not the raw download, the "
       "encoded files or the archives), gives the bytes of both sides together and the sentence pairs as lines of "
       "one side, train_lines (a pair is one line in each file: counted once, not both sides added), in MB "
       "(10^6 bytes) and MiB "
       "(2^20 bytes), each labelled right. Wrong: 2^20 bytes called MB; one side's bytes only; the lines of both "
       "files added as sentences; the raw text's or the archive's size.",
    8: "Full marks: the newest prefix's .index and .data shard(s) and the 'checkpoint' state file, taken from a "
       "listing of the run; why TensorFlow 2 writes no .meta. Wrong: every kept ckpt-N, or the best/ and data/ "
       "folders, counted as one checkpoint.",
    9: "Full marks: the size predicted from the parameter count before measuring (float32 weights plus Adam's m "
       "and v: 3x the weights), then the measured size against it; and the class's three sizes (695, 744 and 830 "
       "MB) reconciled from the kit's measured bytes per parameter: all about 3x the weights, 695 the same bytes "
       "read in MiB, 744 with TF1's .meta beside the .data, 830 with more than 12 B a parameter (an fp16 copy "
       "beside the fp32 master weights). Wrong: measuring first and calling it a prediction; the weights-only "
       "size as the training checkpoint's; MiB labelled MB; three sizes taken for three different models.",
    10: "Full marks: a step is one synchronous update of all ranks (forward, backward, allreduce, apply), so it "
        "consumes every rank's batch; the mean over steady steps in ms. Wrong: one rank's batch as the step's; "
        "the tracing steps in the mean.",
    11: "Full marks: the bytes per step are fixed by the model (measured about the ring's bound), so bytes per "
        "second follow the step rate by construction; decided by the link's share of a step, not by Pearson r. "
        "Wrong: r as a cause; a dashboard screenshot as the evidence.",
    "lab": "Full marks: each run's step predicted from the baseline (the run whose link costs least) plus the ring's "
           "bytes, 2(N-1)/N x parameters x bytes per value, over the link's measured rate, before looking; then "
           "measured; a straight line fitted through (link time, measured step) of the shaped runs of one shape "
           "(2 hosts x 2 ranks: the 2 x 1 run has another compute) with its slope k (near 1 when the model holds) "
           "and intercept (near the baseline's step); the effective bandwidth of a slow-link run; the baseline read "
           "for what it is: its exchange, timed alone, is not free, and its rate (the ring's bytes over that time, "
           "or the busiest 0.1 s sample) sits far below the link's nominal rate: the allreduce was CPU-bound "
           "there; fp16 halving the bytes and cutting the step only where the link, not the compute, set it; the "
           "scaling curve against the cores the ranks could use (the ideal from the manifests' cores: 4 ranks on "
           "the cores of 2 have the ideal of 2); the interface that carried the gradients named from bytes per "
           "step against the ring's bound and from where it leads (the data link; loopback carries as much but "
           "stays within a host, the control network next to nothing). Wrong: fitting with the link's mean rate "
           "over a step (bytes over "
           "that rate give back the step itself: slope 1, intercept 0, by construction); 'the average was below "
           "capacity, so not the bottleneck'; bytes per step far below the ring's bound accepted without checking "
           "the NIC and the unit; a k below 1 put down to the exchange overlapping the backward pass (CPU ranks "
           "send one fused allreduce after it); an ideal of 4x for 4 ranks on 2 cores; the baseline called free "
           "of exchange; loopback or the control network named as the link; a machine's falling CPU read as less "
           "work rather than waiting.",
}

# the verdicts' words on what utilisation cannot show (nmtkit.course.instructor.verdicts, question 4)
NVML_MEANING = ("(NVML's 'utilization' is the share of time at least one kernel ran on the GPU, not how much of the "
                "GPU worked: a GPU at 100% can leave most of its cores idle. Model FLOPs utilisation, MFU, says how "
                "much of the peak arithmetic the model used.)")
NCCL_WAIT = ("A wait for the gradient exchange does not show as idle: NCCL's kernels run on the GPU while the "
             "network is slow, so even 100% does not rule out a network bottleneck; question 5 decides that.")
