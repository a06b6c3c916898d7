"""Chat formatting shared by every component: the Hermes tool-call convention (render and parse), the segment
kinds of sampled tokens (`segments.py`)."""
