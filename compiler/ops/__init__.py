"""Every STeP operator as a graph node (spec section 4), one family per module."""
