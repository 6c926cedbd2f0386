"""Problem-agnostic machinery: the rung registry, timing, device facts, roofline, reports."""
