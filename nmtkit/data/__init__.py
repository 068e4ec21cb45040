"""Data: the corpus (embedded synthetic grammar, WMT16 en-de, or your own files), cleaning, joint BPE, stats, and the
tf.data input. Importing this package imports no TensorFlow; the layers above import the modules by name.

    prepare.py    prepare(cfg): corpus -> cleaning -> joint BPE -> encoded splits -> data_stats.json, step by step
    synthetic.py  the embedded default corpus, from a small grammar and lexicon.py's words
    lexicon.py    the synthetic corpus's lexicon
    wmt.py        WMT16 English-German, as in the Transformer recipes
    owncorpus.py  your own parallel corpus (data.source = "files")
    text.py       reading corpus text files with errors that name the file and line
    clean.py      cleaning a parallel corpus (Moses' clean-corpus-n.perl)
    bpe.py        joint English+German BPE with sentencepiece, and the Tokenizer
    pipeline.py   the encoded splits on disk and the tf.data pipeline that feeds training
    stats.py      the prepared data in numbers (DataStats)
"""
