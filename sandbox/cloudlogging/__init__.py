"""Cloud Logging v2 (entries:list) for the sandbox: state in ``model``, wire in ``http``, filters in
``filter``."""
