"""The interactive face: ``gemma-sre repl``.

``commands.ReplCommands`` is the dispatch (plain, testable: each command returns renderables);
``app.run_repl`` is the prompt_toolkit loop that prints them, completes, keeps history and asks y/n
for an approval; ``ask.answer_question`` sends a free-form question to the model with read-only tools.
"""
