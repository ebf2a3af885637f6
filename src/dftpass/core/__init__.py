"""The core: everything a pass needs, and nothing specific to one rule."""
