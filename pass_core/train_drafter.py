"""``python -m pass_core.train_drafter``: train a ParallelSpec drafter (the trainer is
``pass_core.training.parallelspec``; see docs/training.md)."""

from pass_core.training.parallelspec import main

if __name__ == "__main__":
    main()
