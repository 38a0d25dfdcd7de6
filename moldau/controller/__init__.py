"""Controller: decisions on cluster metadata (`core`), driven on the event loop by `QuorumController`."""

from moldau.controller.quorum_controller import QuorumController

__all__ = ["QuorumController"]
