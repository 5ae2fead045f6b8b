"""Problems: which points exist, their transformed kernel, and how a trained
machine predicts (docs/design.md section 2). One module per formulation
(classification, regression), over a shared driver and machine format."""
from .classification import pairs, train_machine
from .driver import one_blas_thread
from .machine import Machine

__all__ = ["Machine", "one_blas_thread", "pairs", "train_machine"]
