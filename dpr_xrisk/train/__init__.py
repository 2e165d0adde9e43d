"""Training, top-down: the loop (``trainer``) over its construction (``setup``), a step's forward
and backward passes (``step``), the index refresh (``refresh``), dev evaluation (``dev_eval``),
the estimator probe (``probe``), the data order (``order``), batches (``batch``), one mining pass
and the pool sampler (``mining``), data and negative sources (``data``), checkpoints
(``checkpoint``), logs (``log``), torchrun (``distributed``) and the config (``config``).
Modules import only those after them in this list."""
