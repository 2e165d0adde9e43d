"""Training: config (``config``), data and negative sources (``data``), the batch collator
(``batch``), checkpoints (``checkpoint``) and the plain PyTorch loop (``trainer``)."""
