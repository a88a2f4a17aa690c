"""stepforge.sim"""
