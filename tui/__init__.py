"""coldkeep's terminal front-ends, both clients of ``coldkeep.core.archiver``:
``cli`` (the click commands) and ``console`` (the Textual console), over what
they share: ``operations`` (every operation declared once: its command, its
console action and question, its result's words) and ``text`` (sizes, times,
events, the plan and results in words)."""
