"""Problems: which points exist, their transformed kernel, and how a trained
machine predicts (DESIGN.md sec. 2)."""
from .classification import Machine, pairs, train_machine

__all__ = ["Machine", "pairs", "train_machine"]
