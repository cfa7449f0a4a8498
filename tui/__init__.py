"""coldkeep's terminal front-ends: the click CLI and the Textual console."""
