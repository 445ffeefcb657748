"""Trajectories for training: one record shape written by every source, read by every export."""

from .grouping import conversation
from .record import FORMAT_VERSION, StepOutcome, Trajectory, TrajectoryFile, TurnTokens, read_trajectories

__all__ = [
    "FORMAT_VERSION",
    "StepOutcome",
    "Trajectory",
    "TrajectoryFile",
    "TurnTokens",
    "conversation",
    "read_trajectories",
]
