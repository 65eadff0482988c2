"""``gemma-sre serve``: an authenticated HTTP face that alerts wake and chat approves.

- ``alerts``: Cloud Monitoring and Alertmanager webhook payloads, parsed into ``AlertEvent`` s.
- ``ledger``: what the server keeps in the state directory (investigations, alerts, Slack messages,
  seen Slack signatures), in one SQLite file.
- ``slack_face``: the approval request as a Block Kit message and the interactivity callback.
- ``app``: the ASGI app tying them to ``graph.runner`` (the one single-decision path).
"""
