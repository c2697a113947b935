"""Taking over a flow that MirrorMaker 2 replicated (`from_mm2`): its offsets become the flow's progress and
offset map, exactly where MM2 stopped."""
