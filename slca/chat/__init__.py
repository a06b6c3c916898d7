"""Chat formatting shared by every component: the Hermes tool-call convention (render and parse)."""
