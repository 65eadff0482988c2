"""The loop's nodes, one module each. Each is ``node(state, config) -> partial state update``."""
