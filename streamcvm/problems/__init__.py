"""Problems: which points exist, their transformed kernel, and how a trained
machine predicts (DESIGN.md sec. 2)."""
from .classification import Machine, one_blas_thread, pairs, train_machine

__all__ = ["Machine", "one_blas_thread", "pairs", "train_machine"]
