"""Text: what is done to the words after the engine (stitching, ITN, fillers, terms), the personal data found
in them and its masking, and the call's talk-time analytics."""
