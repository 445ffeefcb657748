"""Small helpers shared across plait."""

from .config import create_object, load_class_from_string

__all__ = ["create_object", "load_class_from_string"]
