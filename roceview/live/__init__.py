"""Live capture sessions (`roceview live`): a capture source analyzed as it arrives."""
from roceview.live.session import LiveSession

__all__ = ["LiveSession"]
