"""``kafkawire show``: a capture in the terminal, a line per frame (``show``), filtered (``show_filter``),
printed (``show_output``) with each frame's facts at a glance (``frame_facts``)."""
